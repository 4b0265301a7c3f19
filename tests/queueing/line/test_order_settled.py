"""Order keys drawn before the chain head's lock: a join whose keys are drawn but not yet
committed is never passed by an admission run, though a join behind it commits first
(queueing/records/entries.py, ``order_keys_settled``; queueing/line/joining.py, ``_commit``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from dashboard.reports import event_fairness
from queueing.line import joining
from queueing.line.admission import ManualAdmission, admission_run
from queueing.models import QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from tests.helpers import join, new_fan

pytestmark = pytest.mark.django_db(transaction=True)


def waiting_for_an_advisory_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return cursor.fetchone()[0] > 0


def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_join_still_committing_is_not_passed_by_admission(make_event, monkeypatch) -> None:
    event = make_event(capacity=0, rate_per_minute=0)
    first_inserted, let_first_go = threading.Event(), threading.Event()
    real_lock = joining.audit_chain_lock
    first_thread: list[int] = []

    def paused_before_the_head(**kwargs: Any) -> Any:
        if threading.get_ident() in first_thread:
            first_inserted.set()  # its entry and key are in, uncommitted
            assert let_first_go.wait(timeout=30)
        return real_lock(**kwargs)

    monkeypatch.setattr(joining, "audit_chain_lock", paused_before_the_head)
    answers: dict[str, Any] = {}

    def fan(name: str, *, paused: bool) -> None:
        try:
            if paused:
                first_thread.append(threading.get_ident())
            answers[name] = join(new_fan(), event.slug).json()
        finally:
            connection.close()

    first = threading.Thread(target=fan, args=("first",), kwargs={"paused": True})
    first.start()
    assert first_inserted.wait(timeout=30)
    fan("second", paused=False)  # draws a larger key and commits first
    assert QueueEntry.objects.filter(event=event).count() == 1

    admitted: list[Any] = []

    def admit_one() -> None:
        try:
            outcome = admission_run(
                event_id=event.id, now=timezone.now(), manual=ManualAdmission(count=1, actor="t")
            )
            admitted.extend(outcome.admitted)
        finally:
            connection.close()

    run = threading.Thread(target=admit_one)
    run.start()
    # The run waits for the first join's commit, not for a clock.
    until(waiting_for_an_advisory_lock, "the run never waited for the join in flight")
    let_first_go.set()
    first.join(timeout=30)
    run.join(timeout=30)
    (moved,) = admitted
    keys = dict(QueueEntry.objects.filter(event=event).values_list("public_id", "order_key"))
    assert keys[moved.public_id] == min(keys.values())  # the first join's, drawn first
    assert event_fairness(event).order_inversions == 0
    assert answers["first"]["status"] == answers["second"]["status"] == "waiting"
    assert audit_chain_verify(event_id=event.id).ok


@pytest.mark.parametrize("queue_order", ["fifo", "random"])
def test_joins_and_admissions_at_once_admit_in_order_key_order(make_event, queue_order) -> None:
    """Batches of joins from several threads, inserted before the chain head's lock and
    committing in whatever order, while admission runs again and again beside them: every
    fan is let in in order-key order (in a random line: each admission the lowest place among
    the entries committed before its run, every place recomputed from the seed)."""
    event = make_event(capacity=0, rate_per_minute=0, queue_order=queue_order)
    joining_done = threading.Event()
    failures: list[BaseException] = []

    def batches(worker: int) -> None:
        try:
            for batch in range(5):
                now = timezone.now()
                outcomes = joining.entry_join_many(
                    [
                        joining.JoinRequest(
                            event=event, identity=f"{worker}-{batch}-{n}", access_code=None, now=now
                        )
                        for n in range(10)
                    ]
                )
                assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
        except BaseException as failure:  # noqa: BLE001  reported by the test
            failures.append(failure)
        finally:
            connection.close()

    def admitting() -> None:
        try:
            while True:
                finished = joining_done.is_set()
                outcome = admission_run(
                    event_id=event.id,
                    now=timezone.now(),
                    manual=ManualAdmission(count=7, actor="t"),
                )
                if finished and not outcome.admitted:
                    return
        except BaseException as failure:  # noqa: BLE001  reported by the test
            failures.append(failure)
        finally:
            connection.close()

    admission = threading.Thread(target=admitting)
    admission.start()
    workers = [threading.Thread(target=batches, args=(w,)) for w in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    joining_done.set()
    admission.join(timeout=120)
    assert not failures, failures
    assert QueueEntry.objects.filter(event=event, admitted_at__isnull=False).count() == 300
    fairness = event_fairness(event)
    assert fairness.order_inversions == 0
    assert fairness.place_mismatches == (0 if queue_order == "random" else None)
    assert audit_chain_verify(event_id=event.id).ok
