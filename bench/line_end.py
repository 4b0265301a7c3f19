"""The line-end row of `make bench` (issue 30, item 7): a line of a million closed, and
revoked by the real worker and beat, as a close or a sell-out ends it in production.

The fans are written with one COPY and their index rebuilt (so the drop from Redis is part of
what is measured); the worker and beat are started; then staff close the on-sale and the row
times, from the close, until nobody is left in line in PostgreSQL and the line's sorted sets
are gone from Redis. Then it checks what a revocation must leave: one ``revoked`` record per
fan, and the on-sale's whole trail verifying. About two and a half minutes at a million on
this 2-CPU machine (COPY ~20 s, index ~5 s, the revocation, the trail's check ~25 s).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from bench.environment import stack_env
from bench.lines import bulk_line, new_on_sale
from queueing.hot import keys
from queueing.hot.client import client as hot_client
from queueing.line.index_sync import hot_index_rebuild
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from queueing.rules.states import QUEUED
from staff.services import event_close
from tests.processes import Stack, wait_until


def _line_ended(event_id: int, queue_key: str) -> bool:
    in_line = QueueEntry.objects.filter(event_id=event_id, status__in=QUEUED).exists()
    return not in_line and not hot_client().exists(queue_key)


def run(*, fans: int, logdir: Path) -> dict[str, Any]:
    event = new_on_sale("line-end", actor="bench", capacity=0, rate_per_minute=0)
    started = time.monotonic()
    bulk_line(event, fans)
    with connection.cursor() as cursor:
        # As autovacuum would have while such a line grew (bench/outage.py does the same).
        cursor.execute("ANALYZE queueing_queueentry")
    copy_s = time.monotonic() - started
    started = time.monotonic()
    assert hot_index_rebuild(event_id=event.pk)
    index_s = time.monotonic() - started
    queue_key = keys.tier_queue(event.pk, event.tiers.get().pk)
    assert hot_client().zcard(queue_key) == fans

    (logdir / "line-end").mkdir(exist_ok=True)
    stack = Stack(stack_env(), logdir / "line-end")
    try:
        stack.worker()
        stack.beat()
        time.sleep(3)  # the worker's and beat's start, not part of the revocation
        closed = time.monotonic()
        event_close(event=event, actor="bench", now=timezone.now())
        wait_until(
            lambda: _line_ended(event.pk, queue_key),
            timeout=900,
            what="the line's revocation",
            interval=0.25,
        )
        revoke_s = time.monotonic() - closed
    finally:
        stack.stop()

    revoked = AuditRecord.objects.filter(event=event, action="revoked")
    records = revoked.count()
    tickets = revoked.values("ticket_id").distinct().count()
    started = time.monotonic()
    verdict = audit_chain_verify(event_id=event.pk)
    verify_s = time.monotonic() - started
    return {
        "fans": fans,
        "copy_s": round(copy_s, 1),
        "index_rebuild_s": round(index_s, 1),
        "revoke_s": round(revoke_s, 1),
        "fans_per_s": round(fans / revoke_s),
        "revoked_records": records,
        "revoked_tickets": tickets,
        "trail_ok": verdict.ok and verdict.complete,
        "trail_records": verdict.records,
        "verify_s": round(verify_s, 1),
        "chunk": settings.WR_LINE_END_CHUNK,
        "parallel": settings.WR_LINE_END_PARALLEL,
        "tick_seconds": settings.WR_LINE_END_SECONDS,
    }
