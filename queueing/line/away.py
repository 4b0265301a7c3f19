"""Away, not gone: a fan whose page was not seen for the heartbeat window (a phone that put
the tab to sleep, a closed laptop) keeps the place for the on-sale's ``away_seconds`` more.

- **Before their turn** nothing happens to an away fan: they stay where they are, counted in
  the positions of those behind them (they may come back before their turn, and then they go
  first). The heartbeat deadlines in the hot index tell away (``heartbeat_seconds`` unseen)
  from gone (``away_seconds`` more): expiry ends only the gone (``line/expiry.py``).
- **At their turn** admission passes an away fan over (``passed_over``): never a shop slot
  for a page nobody looks at. The entry stays ``waiting`` with ``passed_over_at`` set, out
  of the line's order (``records/entry_reads.IN_ORDER``; the hot index drops it), so nobody
  behind counts them any more. The trail records ``away``.
- **When they come back** (any answer about their ticket: the page, a poll, a socket, the
  place link all ask for one) they are put back with the order key they had, which is ahead
  of everyone still waiting in their tier: they go in first, as a re-entry does, and
  admission is asked to run at once (``away_back``). The trail records ``back``.
- **Never back**: ``away_seconds`` after their turn came, expiry ends them as ``expired``
  (the same ``no_heartbeat`` reason). A fan passed over is thus held at least as long as
  the page promises ("you can close this page for up to ..."), counted from their turn.

``away_seconds`` = 0 is the old rule: unseen for the heartbeat window is expired.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection, transaction

from queueing.hot.line_index import Placement
from queueing.line.followups import admission_soon
from queueing.line.index_sync import index_add, index_holder_moved
from queueing.models import AuditAction, QueueEntry
from queueing.records.audit import audit_append
from queueing.records.transitions import Moved
from queueing.rules.layout import EventLayout
from queueing.rules.states import EntryStatus


def passed_over(*, ids: Sequence[int], now: datetime) -> list[Moved]:
    """In the admission run's transaction: these waiting fans are away at their turn. Marked
    by compare-and-set (only those still waiting in order); the run records ``away`` and
    drops them from the hot index after its commit."""
    if not ids:
        return []
    table = QueueEntry._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET passed_over_at = %s "
            "WHERE id = ANY(%s) AND status = %s AND passed_over_at IS NULL "
            "RETURNING id, public_id, event_id, tier_id, order_key, lane",
            [now, list(ids), EntryStatus.WAITING.value],
        )
        rows = cursor.fetchall()
    return [
        Moved(
            id=entry_id,
            public_id=public_id,
            event_id=event_id,
            tier_id=tier_id,
            order_key=order_key,
            previous=EntryStatus.WAITING,
            lane=lane,
        )
        for entry_id, public_id, event_id, tier_id, order_key, lane in rows
    ]


def away_back(entry: QueueEntry, *, layout: EventLayout, now: datetime) -> Placement | None:
    """A fan passed over while away asks about their ticket: back in their tier with their
    own order key (ahead of everyone waiting there), admission asked for at once. Where the
    hot index has them now, or None (not back: someone else brought them back or ended the
    place meanwhile, or Redis could not be written and the index is flagged for a rebuild,
    which loads them). ``entry`` is updated in place."""
    passed_at = entry.passed_over_at
    with transaction.atomic():
        back = QueueEntry.objects.filter(
            pk=entry.pk, status=EntryStatus.WAITING, passed_over_at__isnull=False
        ).update(passed_over_at=None)
        if not back:
            return None
        audit_append(
            event_id=entry.event_id,
            action=AuditAction.BACK,
            actor="fan",
            at=now,
            ticket_id=entry.public_id,
            data={
                "order_key": entry.order_key,
                "passed_over_at": passed_at.isoformat() if passed_at else None,
            },
        )
        # Robust: with the broker down the fan still waits at the front; the tick admits.
        transaction.on_commit(lambda: admission_soon(entry.event_id), robust=True)
    entry.passed_over_at = None
    (placement,) = index_add(
        layout,
        [entry],
        add="tier",
        heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds,
    )
    if entry.holder_key:  # a moved place: its hint left the index with it (remove.lua)
        index_holder_moved(entry.event_id, entry.id, entry.holder_key, lane=entry.lane)
    return placement
