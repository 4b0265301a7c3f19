"""Workers keep their PostgreSQL connections from task to task (config/celery.py, settings'
CELERY_DB_REUSE_MAX), and get fresh ones by themselves when PostgreSQL goes away and comes
back, without being restarted."""

from __future__ import annotations

import json
import time

import pytest
from django.db import connection
from django.utils import timezone

from queueing.hot import keys
from staff.services import event_pause
from tests.faults import TcpProxy
from tests.helpers import waiting_entries
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def _ticking_on_sale(make_event, slug: str):
    """A paused on-sale with fans in line: it ticks every second (expiry, heal, the paused
    run, the broadcast), and nobody is let in."""
    event = make_event(slug=slug, capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    event_pause(event=event, actor="staff:x", now=timezone.now())
    waiting_entries(event, event.tiers.get(), 20)
    return event


def _last_tick_at(redis_client, event) -> float:
    raw = redis_client.get(keys.last_tick(event.id))
    return json.loads(raw)["at"] if raw else 0.0


def _ticks_after(redis_client, event, moment: float, count: int, *, timeout: float) -> None:
    """``count`` ticks broadcast after ``moment`` (each a tick the worker ran through)."""
    seen: set[float] = set()

    def enough() -> bool:
        at = _last_tick_at(redis_client, event)
        if at > moment:
            seen.add(at)
        return len(seen) >= count

    wait_until(enough, timeout=timeout, what=f"{count} ticks", interval=0.2)


def _backends() -> set[tuple[int, str]]:
    """The other sessions on the test database (pid, start): the worker's, here."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start::text FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        )
        return set(cursor.fetchall())


def test_a_worker_opens_no_connection_per_tick(make_event, redis_client) -> None:
    event = _ticking_on_sale(make_event, "steady")
    with running_stack() as stack:
        stack.worker(concurrency=1)
        stack.beat()
        _ticks_after(redis_client, event, 0, 3, timeout=30)
        before = _backends()
        assert before, "the worker holds a connection"
        _ticks_after(redis_client, event, time.time(), 6, timeout=30)
        after = _backends()
    # The same sessions after six more ticks (each several queries, and the room's dispatch
    # and the index check besides): none opened, none closed.
    assert after == before


def test_workers_recover_by_themselves_when_postgresql_comes_back(make_event, redis_client) -> None:
    event = _ticking_on_sale(make_event, "restart")
    db = connection.settings_dict
    proxy = TcpProxy(int(db["PORT"]))
    try:
        with running_stack(DATABASE_POOL_TIMEOUT="1", DATABASE_CONNECT_TIMEOUT="1") as stack:
            # The scheduler reaches PostgreSQL directly (cut away, it would send no tick for
            # the worker to fail on); only the worker's connections go through the proxy.
            stack.beat()
            stack.env["DATABASE_URL"] = (
                f"postgres://{db['USER']}@127.0.0.1:{proxy.port}/{db['NAME']}"
            )
            worker = stack.worker(concurrency=1)
            _ticks_after(redis_client, event, 0, 3, timeout=30)
            # PostgreSQL gone, as a restart looks from the worker: every connection it kept
            # is dropped, and new ones are refused for a few seconds.
            proxy.cut()
            cut_at = time.time()
            wait_until(
                lambda: "OperationalError" in stack.log("worker"),
                timeout=15,
                what="the worker's ticks to fail",
            )
            time.sleep(2)
            proxy.restore()
            _ticks_after(redis_client, event, time.time(), 3, timeout=30)
            assert worker.poll() is None  # the same worker, never restarted
            assert _last_tick_at(redis_client, event) > cut_at
    finally:
        proxy.close()
