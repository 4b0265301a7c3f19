"""Away fans with the real processes (gunicorn + uvicorn, Celery worker and beat): a third of
the line stops asking (phones asleep) while the rest keeps polling and the shop sells. Away
fans never hold a slot, capacity and pace hold, one who comes back goes in before everyone
still waiting behind, and the order holds but for that rule (queueing/line/away.py)."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
from django.utils import timezone

from dashboard.reports import event_report
from queueing.models import AuditRecord, QueueEntry
from queueing.rules.ticket_codec import ticket_read
from staff.services import event_pause, event_resume
from tests.http import fan_joins, pass_complete, ticket_status
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

CAPACITY = 3
RATE_PER_MINUTE = 120  # 2 a second
HEARTBEAT = 10


class Shop:
    """Present fans poll; whoever the room lets in shops for a moment and checks out."""

    def __init__(self, base: str, integration_key: str, present: list[str]) -> None:
        self.base, self.key = base, integration_key
        self.waiting = list(present)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.inside_peak = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                tickets = list(self.waiting)
            for ticket in tickets:
                body = ticket_status(self.base, ticket)  # the heartbeat of a present page
                if body["status"] == "admitted":
                    with self.lock:
                        self.waiting.remove(ticket)
                    pass_complete(self.base, self.key, body["pass"])
            inside = QueueEntry.objects.filter(status="admitted").count()
            self.inside_peak = max(self.inside_peak, inside)
            time.sleep(0.5)


def entry_id(ticket: str) -> int:
    return ticket_read(ticket).entry_id


def test_away_fans_hold_no_slot_and_the_line_keeps_its_order_and_pace(make_event) -> None:
    event = make_event(
        capacity=CAPACITY,
        rate_per_minute=RATE_PER_MINUTE,
        heartbeat_seconds=HEARTBEAT,
        away_seconds=600,
    )
    event_pause(event=event, actor="test", now=timezone.now())
    with running_stack() as stack:
        base = stack.web()
        tickets = [fan_joins(base, event.slug)["ticket"] for _ in range(24)]
        away = tickets[::3]  # every third fan's phone goes to sleep now
        present = [t for t in tickets if t not in away]
        shop = Shop(base, event.integration_key, present)
        shop.thread.start()
        stack.worker()
        stack.beat()
        try:
            time.sleep(HEARTBEAT + 2)  # the sleeping phones' heartbeats lapse
            resumed_at = timezone.now()
            event_resume(event=event, actor="test", now=resumed_at)
            wait_until(
                lambda: AuditRecord.objects.filter(event=event, action="away").count() >= 4,
                timeout=60,
                what="the first away fans to be passed over",
            )
            # One phone wakes up: its fan goes in before everyone still waiting behind.
            returning = away[1]
            assert ticket_status(base, returning)["status"] == "waiting"
            wait_until(
                lambda: ticket_status(base, returning)["status"] == "admitted",
                timeout=30,
                what="the fan who came back to be let in",
            )
            wait_until(lambda: not shop.waiting, timeout=90, what="every present fan to go in")
        finally:
            shop.stop.set()
            shop.thread.join(timeout=30)

    entries = {e.id: e for e in QueueEntry.objects.filter(event=event)}
    asleep = [entries[entry_id(t)] for t in away if t != returning]
    # Never a slot for a page nobody looks at: passed over, place kept.
    assert all(e.admitted_at is None and e.status == "waiting" for e in asleep)
    assert all(e.passed_over_at is not None for e in asleep)
    assert shop.inside_peak <= CAPACITY
    admitted_at = sorted(e.admitted_at for e in entries.values() if e.admitted_at is not None)
    assert len(admitted_at) == len(present) + 1
    assert _most_in_any_window(admitted_at, seconds=5) <= RATE_PER_MINUTE / 60 * (5 + 3) + 1
    back = entries[entry_id(returning)]
    assert back.admitted_at is not None
    # In the trail's order: after the "back" record, the returning fan is among the first let
    # in (an admission run that picked its fans before the return may still commit first).
    back_seq = AuditRecord.objects.get(event=event, action="back").seq
    let_in_after = list(
        AuditRecord.objects.filter(event=event, action="admitted", seq__gt=back_seq)
        .order_by("seq")
        .values_list("ticket_id", flat=True)
    )
    assert len(let_in_after) > CAPACITY + 1, "too few were behind to tell the order"
    assert back.public_id in let_in_after[: CAPACITY + 1]
    report = event_report(event)
    assert report["came_back_after_turn"] == 1
    assert report["passed_over_away"] == len(away)
    assert report["order_inversions"] == 0


def _most_in_any_window(times: list[datetime], *, seconds: float) -> int:
    """The most admissions within any ``seconds`` (the pace's burst allowance included)."""
    most, start = 0, 0
    for end, at in enumerate(times):
        while (at - times[start]).total_seconds() > seconds:
            start += 1
        most = max(most, end - start + 1)
    return most
