"""Ending tickets nobody is looking at, so that they never stall the line.

- Waiting (and pre-queue) tickets whose page was not seen within ``heartbeat_seconds`` expire;
  the candidates come from the hot index's heartbeat deadlines, the decision from PostgreSQL.
  Nobody expires while the index is being rebuilt or flagged stale: heartbeats it could not
  record (a Redis outage) never expire a fan.
- Admitted sessions expire when their pass does, or when the fan never came to collect the
  pass within the heartbeat window (an abandoned tab must not hold a shop slot).
Both work in bounded batches.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q

from events.models import Event
from queueing.hot import epoch, heartbeats
from queueing.hot.client import HotIndexUnavailable
from queueing.hot.line_index import IndexState
from queueing.line.index_sync import index_forget
from queueing.models import AuditAction, QueueEntry
from queueing.records.transitions import Moved, transition_audited
from queueing.rules.states import QUEUED, EntryStatus

BATCH = 1000


def _expire(
    event_id: int,
    ids: list[int],
    expected: tuple[EntryStatus, ...],
    reason: str,
    now: datetime,
    *,
    only_unclaimed: bool = False,
) -> list[Moved]:
    return transition_audited(
        event_id=event_id,
        ids=ids,
        to=EntryStatus.EXPIRED,
        expected=expected,
        now=now,
        action=AuditAction.EXPIRED,
        actor="system:expiry",
        data=lambda m: {"reason": reason, "from": m.previous},
        only_unclaimed=only_unclaimed,
    )


def queued_expire_unseen(*, event_id: int, now: datetime) -> int:
    if Event.objects.filter(pk=event_id, hot_index_dirty=True).exists():
        # The index missed writes, heartbeats among them (Redis was away: line/heartbeat_gaps.py):
        # its deadlines are not to be trusted until the rebuild renews them all.
        return 0
    try:
        if epoch.epoch_states([event_id])[event_id] is not IndexState.READY:
            return 0  # deadlines are being reloaded; a rebuild grants everyone a grace period
        overdue = heartbeats.overdue_members(event_id, now=now.timestamp(), limit=BATCH)
    except HotIndexUnavailable:
        return 0
    if not overdue:
        return 0
    moved = _expire(event_id, overdue, QUEUED, "no_heartbeat", now)
    index_forget(event_id, moved)
    # Entries that had already left the line by other means: take them out of every list.
    gone = set(overdue) - {m.id for m in moved}
    if gone:
        index_forget(event_id, QueueEntry.objects.filter(pk__in=gone).only("id", "tier_id"))
        missing = gone - set(QueueEntry.objects.filter(pk__in=gone).values_list("id", flat=True))
        try:
            heartbeats.forget_heartbeats(event_id, list(missing))
        except HotIndexUnavailable:
            pass
    return len(moved)


def sessions_expire(*, event_id: int, now: datetime) -> int:
    event = Event.objects.filter(pk=event_id).values("heartbeat_seconds").first()
    if event is None:
        return 0
    admitted = QueueEntry.objects.filter(event_id=event_id, status=EntryStatus.ADMITTED)
    unclaimed_before = now - timedelta(seconds=event["heartbeat_seconds"])
    expired = 0
    for reason, condition in (
        ("pass_expired", Q(pass_expires_at__lte=now)),
        ("not_claimed", Q(pass_issued_at__isnull=True, admitted_at__lt=unclaimed_before)),
    ):
        ids = list(admitted.filter(condition).values_list("id", flat=True)[:BATCH])
        if ids:
            # "not_claimed" re-checks, in the UPDATE, that the pass is still uncollected.
            only_unclaimed = reason == "not_claimed"
            moved = _expire(
                event_id, ids, (EntryStatus.ADMITTED,), reason, now, only_unclaimed=only_unclaimed
            )
            expired += len(moved)
    return expired
