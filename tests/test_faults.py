"""Faults during a sale, each against the real processes: nothing acknowledged is lost,
nobody is admitted twice, the shop is never over capacity, and the room recovers by itself."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from queueing.hot import keys
from queueing.line.admission import ADMISSION_LOCK_NAMESPACE
from queueing.line.index_sync import hot_index_rebuild
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from queueing.rules.shuffle import shuffled_order
from staff.services import event_update
from tests.faults import RedisServer, TcpProxy, kill_process_group
from tests.helpers import waiting_entries
from tests.http import fan_joins, request, ticket_complete
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

STABLE_REDIS = settings.REDIS_URL  # the broker and channel layer stay up in these tests


# A join's answers: a new place (201), or the place this fan already holds (200).
JOINED = (200, 201)


def count(event, status: str) -> int:
    return QueueEntry.objects.filter(event=event, status=status).count()


def no_double_admission(event) -> None:
    ids = list(
        AuditRecord.objects.filter(event=event, action="admitted").values_list(
            "ticket_id", flat=True
        )
    )
    assert len(ids) == len(set(ids))
    assert len(ids) == QueueEntry.objects.filter(event=event, admitted_at__isnull=False).count()


def test_redis_killed_and_restarted_mid_sale_loses_nothing(make_event, tmp_path) -> None:
    hot = RedisServer(tmp_path)
    hot.start()
    event = make_event(slug="rr", capacity=2, rate_per_minute=0, heartbeat_seconds=600)
    try:
        with running_stack(
            REDIS_URL=hot.url, CELERY_BROKER_URL=STABLE_REDIS, CHANNELS_REDIS_URL=STABLE_REDIS
        ) as stack:
            base = stack.web()
            stack.worker()
            stack.beat()
            tickets = [fan_joins(base, "rr", accept=JOINED)["ticket"] for _ in range(20)]
            wait_until(lambda: count(event, "admitted") == 2, timeout=20, what="admissions")

            hot.kill()
            # Joins and status still work, from PostgreSQL.
            during = [fan_joins(base, "rr", accept=JOINED) for _ in range(5)]
            assert {body["status"] for body in during} == {"waiting"}
            assert [body["position"] for body in during] == [19, 20, 21, 22, 23]
            # Admission carries on: a slot frees and the next fan is let in.
            ticket_complete(base, event, tickets[0])
            wait_until(
                lambda: count(event, "admitted") == 2 and count(event, "completed") == 1,
                timeout=10,
                what="admission without Redis",
            )

            hot.start()  # empty: it lost everything
            probe = redis.Redis(port=hot.port)
            wait_until(
                lambda: (probe.get(keys.epoch(event.id)) or b"").startswith(b"ready:"),
                timeout=10,
                what="the index to be rebuilt",
            )
            waiting = list(
                QueueEntry.objects.filter(event=event, status="waiting").order_by("order_key")
            )
            positions = [
                request("GET", f"{base}/api/v1/tickets/{t}").body["position"]
                for t in tickets[3:] + [b["ticket"] for b in during]
            ]
            assert positions == list(range(1, len(waiting) + 1))
            assert QueueEntry.objects.filter(event=event).count() == 25  # every acknowledged join
            after = fan_joins(base, "rr", accept=JOINED)
            assert after["position"] == len(waiting) + 1
            no_double_admission(event)
            assert audit_chain_verify(event_id=event.id).ok
    finally:
        hot.kill()


def _advisory_lock_held(event_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid = %s AND granted",
            [ADMISSION_LOCK_NAMESPACE, event_id],
        )
        return cursor.fetchone()[0] > 0


def test_a_worker_killed_mid_admission_admits_nobody_twice_and_loses_nobody(make_event) -> None:
    event = make_event(slug="kill", capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    total, batch = 30_000, 10_000
    waiting_entries(event, event.tiers.get(), total, prefix="k")
    assert hot_index_rebuild(event_id=event.id)
    with running_stack(WR_ADMISSION_BATCH=str(batch)) as stack:
        worker = stack.worker(concurrency=1)
        stack.beat()
        wait_until(
            lambda: _advisory_lock_held(event.id),
            timeout=30,
            interval=0.002,
            what="an admission batch in flight",
        )
        kill_process_group(worker)
        time.sleep(1)
        admitted = count(event, "admitted")
        # The batch in flight was rolled back whole; none half-admitted.
        assert admitted % batch == 0 and admitted < total
        assert count(event, "waiting") + admitted == total
        no_double_admission(event)
        stack.worker(name="replacement")
        wait_until(
            lambda: count(event, "admitted") == total,
            timeout=60,
            what="admission to resume and finish",
        )
        no_double_admission(event)
        assert audit_chain_verify(event_id=event.id).ok


def test_two_beats_at_once_admit_nobody_twice(make_event) -> None:
    event = make_event(slug="beats", capacity=3, rate_per_minute=0, heartbeat_seconds=600)
    with running_stack() as stack:
        base = stack.web()
        tickets = [fan_joins(base, "beats", accept=JOINED)["ticket"] for _ in range(30)]
        stack.worker(name="w1")
        stack.worker(name="w2")
        stack.beat(name="beat1")
        stack.beat(name="beat2")
        done: set[str] = set()
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline and len(done) < 12:
            assert count(event, "admitted") <= 3
            for ticket in tickets:
                if ticket in done:
                    continue
                body = request("GET", f"{base}/api/v1/tickets/{ticket}").body
                if body["status"] == "admitted":
                    ticket_complete(base, event, ticket)
                    done.add(ticket)
                    break
            time.sleep(0.2)
        assert len(done) >= 12
        assert count(event, "admitted") <= 3
        no_double_admission(event)
        assert audit_chain_verify(event_id=event.id).ok


def test_postgresql_unreachable_answers_503_and_recovers(make_event) -> None:
    make_event(slug="pg", capacity=0, rate_per_minute=0)
    db = connection.settings_dict
    proxy = TcpProxy(int(db["PORT"]))
    try:
        with running_stack(
            DATABASE_URL=f"postgres://{db['USER']}@127.0.0.1:{proxy.port}/{db['NAME']}",
            DATABASE_POOL_TIMEOUT="2",
            DATABASE_CONNECT_TIMEOUT="1",
        ) as stack:
            base = stack.web(workers=1)
            acknowledged = [fan_joins(base, "pg", accept=JOINED)["ticket"] for _ in range(5)]
            proxy.cut()
            started = time.monotonic()
            refused = request("POST", f"{base}/api/v1/events/pg/join", {})
            assert refused.status == 503, refused.body
            assert refused.body["error"] == "unavailable"
            assert int(refused.headers["retry-after"]) > 0
            assert time.monotonic() - started < 10
            assert request("GET", f"{base}/readyz").status == 503
            proxy.restore()
            wait_until(
                lambda: request("POST", f"{base}/api/v1/events/pg/join", {}).status == 201,
                timeout=20,
                what="joins to work again",
            )
            assert request("GET", f"{base}/readyz").status == 200
            for ticket in acknowledged:
                assert request("GET", f"{base}/api/v1/tickets/{ticket}").body["status"] == "waiting"
        # Nothing half-written: every entry has its joined record, and the chain is whole.
        event = QueueEntry.objects.filter(event__slug="pg").first().event
        entries = QueueEntry.objects.filter(event=event).count()
        assert AuditRecord.objects.filter(event=event, action="joined").count() == entries
        assert audit_chain_verify(event_id=event.id).ok
    finally:
        proxy.close()


def test_a_burst_of_joins_at_the_sale_start_while_admission_runs(make_event) -> None:
    event = make_event(
        slug="burst",
        starts_at=timezone.now() + timedelta(minutes=10),
        capacity=40,
        rate_per_minute=0,
        heartbeat_seconds=600,
    )
    with running_stack() as stack:
        base = stack.web(workers=2)
        stack.worker()
        stack.beat()
        # The start is set once the processes are up: on a loaded machine they can take
        # longer to start than any lead fixed before them, and the burst must straddle it.
        starts = timezone.now() + timedelta(seconds=4)
        event_update(
            event=event, actor="staff:test", now=timezone.now(), changes={"starts_at": starts}
        )

        def timed_join(i: int) -> dict:
            # 400 joins spread over the two seconds either side of the start.
            delay = (starts - timezone.now()).total_seconds() - 2 + i * 4 / 400
            if delay > 0:
                time.sleep(delay)
            return fan_joins(base, "burst", accept=JOINED)

        with ThreadPoolExecutor(max_workers=48) as pool:
            replies = list(pool.map(timed_join, range(400)))
        assert len({r["ticket"] for r in replies}) == 400
        cohort = sum(1 for r in replies if r["status"] == "prequeue")
        assert cohort > 0
        wait_until(
            lambda: count(event, "prequeue") == 0 and count(event, "admitted") == 40,
            timeout=20,
            what="the start and the first admissions",
        )
        no_double_admission(event)
        assert count(event, "admitted") == 40
        event.refresh_from_db()
        shuffled = AuditRecord.objects.get(event=event, action="shuffled", ticket_id=None)
        cohort_ids = [
            str(r.ticket_id)
            for r in AuditRecord.objects.filter(event=event, action="joined")
            if r.data["status"] == "prequeue"
        ]
        assert shuffled.data["cohort"] == len(cohort_ids) == cohort
        by_key = [
            str(p)
            for p in QueueEntry.objects.filter(event=event)
            .order_by("order_key")
            .values_list("public_id", flat=True)
        ]
        assert by_key[:cohort] == shuffled_order(event.shuffle_seed, cohort_ids)
        waiting = [r["ticket"] for r in replies]
        positions = [request("GET", f"{base}/api/v1/tickets/{t}").body["position"] for t in waiting]
        placed = sorted(p for p in positions if p is not None)
        assert placed == list(range(1, 361))
        assert audit_chain_verify(event_id=event.id).ok
