"""Heartbeats and expiry: a fan's page is seen, and tickets nobody is looking at end, so that
they never stall the line.

- **Heartbeats.** A poll records its fan's heartbeat in the hot index, in the same Lua call
  that finds where they stand (``heartbeat``); pages with an open socket are kept alive in
  one write per process and on-sale every few seconds (``heartbeats_refresh``).
- **Heartbeats the hot index could not record.** While Redis is away a poll is still
  answered (from PostgreSQL), but its heartbeat is lost, and when Redis comes back with its
  data (a network cut, a stalled server) every deadline there would be in the past. A
  process whose connection pool stays spent (``HotIndexBusy``) loses its heartbeats the same
  way, though Redis answers other processes. So once a process has failed to record an
  on-sale's heartbeats for ``FLAG_AFTER_SECONDS`` without a success in between, it flags the
  on-sale's index as stale in PostgreSQL, as a write missed after a commit does
  (``index_sync.mark_index_dirty``): expiry waits while the flag is up (``line_reads.unseen``
  and ``line_reads.overdue`` count everyone as seen), whichever process runs it and whatever
  Redis it reaches; the maintenance task rebuilds the index once Redis answers, and the
  rebuild gives every fan a fresh ``heartbeat_seconds`` from then. A shorter blip flags
  nothing, and needs not: a fan polls at least three times a heartbeat, and a poll answered
  without the hot index asks to come back within half of one (``rules/layout.py``). The
  flag is written at most once per ``FLAG_EVERY_SECONDS`` per process and on-sale, and only
  changes a row not flagged yet.
- **Expiry.** Waiting (and pre-queue) tickets whose page was not seen within
  ``heartbeat_seconds`` expire; the candidates come from the hot index's heartbeat
  deadlines, the decision from PostgreSQL. Admitted sessions expire when their pass does,
  or when the fan never came to collect the pass within the heartbeat window (an abandoned
  tab must not hold a shop slot). Both work in bounded batches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q

from events.models import Event
from queueing.hot import line_index
from queueing.hot.client import HotIndexBusy, HotIndexUnavailable, answered
from queueing.hot.line_index import LocateRequest, Placement
from queueing.in_process import ProcessCache, closes_old_connections
from queueing.line.index_sync import index_forget, index_forget_heartbeats
from queueing.line.lanes import placement_in_line, placement_in_line_async
from queueing.line.reads import line_reads
from queueing.models import AuditAction, QueueEntry
from queueing.records.bulk_ends import entries_end_chunk
from queueing.records.transitions import Moved, transition_audited
from queueing.rules.layout import EventLayout
from queueing.rules.states import QUEUED, EntryStatus

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

BATCH = 1000
FLAG_AFTER_SECONDS = 1.0
FLAG_EVERY_SECONDS = 1.0


# ------------------------------------------------------------------------- heartbeats


def heartbeat(
    layout: EventLayout,
    *,
    member: int,
    tier_id: int,
    now: datetime,
    holder: str = "",
    lane: int = 0,
) -> Placement | None:
    """Record that the fan's page was seen, and where they stand (``holder``: the holder key
    the asking ticket names); None when the hot index could not be asked (the heartbeat is
    counted as unrecorded)."""
    _, placement = _recorded(
        layout.event_id,
        line_index.locate,
        layout,
        member=member,
        tier_id=tier_id,
        heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds,
        holder=holder,
        lane=lane,
    )
    if placement is None:
        return None
    return placement_in_line(layout, placement, lane=lane, tier_id=tier_id)


async def heartbeat_async(layout: EventLayout, request: LocateRequest) -> Placement | None:
    """``heartbeat`` from the event loop; the flag, when due, is written in a thread that the
    poll does not wait for. Raises HotIndexBusy when the event loop's own pool was spent:
    the caller then asks the synchronous way, whose pool records the heartbeat."""
    try:
        placement = await line_index.locate_async(layout, request)
    except HotIndexBusy:
        raise
    except HotIndexUnavailable:
        if _gaps.unrecorded_due(layout.event_id):
            _flag_soon(layout.event_id)
        return None
    _gaps.recorded(layout.event_id)
    return await placement_in_line_async(
        layout, placement, lane=request.lane, tier_id=request.tier_id
    )


def heartbeats_refresh(
    event_id: int,
    members: Sequence[int],
    *,
    deadline: float,
    lanes: Mapping[int, int] | None = None,
) -> bool:
    """Push the deadline of fans watching over a WebSocket (``lanes``: the lane of those not
    in lane 0), one write per lane; False when it could not be."""
    by_lane: dict[int, list[int]] = {}
    for member in members:
        by_lane.setdefault(lanes.get(member, 0) if lanes else 0, []).append(member)
    for lane, lane_members in by_lane.items():
        done, _ = _recorded(
            event_id,
            line_index.refresh_heartbeats,
            event_id,
            lane_members,
            deadline=deadline,
            lane=lane,
        )
        if not done:
            return False
    return True


def _recorded(
    event_id: int, write: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> tuple[bool, T | None]:
    """``write`` of heartbeats to the hot index, counted as recorded or not: the one place a
    lost heartbeat of a synchronous caller is noticed. Whether Redis took it, and what it
    answered."""
    done, result = answered(write, *args, **kwargs)
    if done:
        _gaps.recorded(event_id)
    else:
        # Redis away, or this process's pool spent (HotIndexBusy): either way this heartbeat
        # is lost, and a pool that stays spent for a second loses them all, as an outage does.
        heartbeats_unrecorded(event_id)
    return done, result


@dataclass
class _Gap:
    failing_since: float  # time.monotonic() of the first heartbeat lost since a success
    flagged_at: float | None = None


class HeartbeatGaps:
    """Per on-sale, since when this process has failed to record heartbeats."""

    def __init__(self) -> None:
        self._gaps: ProcessCache[int, _Gap] = ProcessCache("heartbeat gaps", max_entries=10_000)

    def recorded(self, event_id: int) -> None:
        """A heartbeat of the on-sale was recorded: any run of failures is over. Costs a poll
        nothing while there is none."""
        if len(self._gaps):
            self._gaps.pop(event_id)

    def unrecorded_due(self, event_id: int, *, now: float | None = None) -> bool:
        """A heartbeat could not be recorded at ``now`` (``time.monotonic()``): whether this
        process should flag the on-sale now (it then counts as flagged)."""
        now = time.monotonic() if now is None else now
        with self._gaps.lock:
            found = self._gaps.kept(event_id)
            gap = found[0] if found is not None else self._gaps.put(event_id, _Gap(now))
            if now - gap.failing_since < FLAG_AFTER_SECONDS:
                return False
            if gap.flagged_at is not None and now - gap.flagged_at < FLAG_EVERY_SECONDS:
                return False
            gap.flagged_at = now
            return True


_gaps = HeartbeatGaps()


def heartbeats_unrecorded_flag(event_id: int) -> None:
    """Flag the on-sale's index stale (never fails the poll that asks)."""
    try:
        changed = Event.objects.filter(pk=event_id, hot_index_dirty=False).update(
            hot_index_dirty=True
        )
    except DatabaseError:
        logger.warning("could not flag the heartbeats of event %s as unrecorded", event_id)
        return
    if changed:
        logger.warning(
            "heartbeats of event %s could not be recorded; expiry waits for its rebuild",
            event_id,
        )


def heartbeats_unrecorded(event_id: int) -> None:
    """A fan's heartbeat could not be recorded (Redis unreachable)."""
    if _gaps.unrecorded_due(event_id):
        heartbeats_unrecorded_flag(event_id)


# Flags being written from the event loop (kept so that they are not collected mid-way).
_FLAGGING: set[asyncio.Future[None]] = set()


def _flag_soon(event_id: int) -> None:
    flagging = asyncio.ensure_future(asyncio.to_thread(_flag_in_thread, event_id))
    _FLAGGING.add(flagging)
    flagging.add_done_callback(_FLAGGING.discard)


@closes_old_connections
def _flag_in_thread(event_id: int) -> None:
    heartbeats_unrecorded_flag(event_id)


# ----------------------------------------------------------------------------- expiry


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


def queued_expire_unseen(
    *,
    event_id: int,
    now: datetime,
    away_seconds: int | None = None,
    go_on: Callable[[], bool] = lambda: True,
) -> int:
    """Tickets in line whose page was not seen for the heartbeat window and ``away_seconds``
    (the on-sale's, read if not given) more end as ``expired``; so do those passed over at
    their turn while away ``away_seconds`` ago (line/away.py). The unseen in bulk: a chunk of
    ``WR_EXPIRY_CHUNK`` a transaction, with their records, and out of the hot index with
    one call per chunk, until none are due or ``go_on()`` says stop (the tick's time)."""
    if away_seconds is None:
        away_seconds = (
            Event.objects.filter(pk=event_id).values_list("away_seconds", flat=True).first() or 0
        )
    held_since = now - timedelta(seconds=away_seconds)
    expired = _expire_passed_over(event_id, held_since=held_since, now=now)
    chunk = settings.WR_EXPIRY_CHUNK
    while True:
        by_lane = line_reads.unseen(event_id, held_since, limit=chunk)
        overdue = [member for members in by_lane.values() for member in members]
        for start in range(0, len(overdue), chunk):
            expired += _expire_unseen(event_id, by_lane, overdue[start : start + chunk], now)
            if not go_on():
                return expired
        if all(len(members) < chunk for members in by_lane.values()):
            return expired


def _expire_unseen(
    event_id: int, by_lane: dict[int, list[int]], overdue: list[int], now: datetime
) -> int:
    """One chunk of the unseen (``by_lane``: where each was found) ended, with their records,
    and out of the hot index."""
    moved = entries_end_chunk(
        event_id=event_id,
        to=EntryStatus.EXPIRED,
        expected=QUEUED,
        now=now,
        action=AuditAction.EXPIRED,
        actor="system:expiry",
        data=lambda previous: {"reason": "no_heartbeat", "from": previous},
        limit=len(overdue),
        ids=overdue,
    )
    index_forget(event_id, moved)
    # Entries that had already left the line by other means: take them out of every list.
    gone = set(overdue) - {m.id for m in moved}
    if gone:
        index_forget(event_id, QueueEntry.objects.filter(pk__in=gone).only("id", "tier_id", "lane"))
        known = set(QueueEntry.objects.filter(pk__in=gone).values_list("id", flat=True))
        for lane, members in by_lane.items():
            missing = [member for member in members if member in gone and member not in known]
            if missing:
                index_forget_heartbeats(event_id, missing, lane=lane)
    return len(moved)


def _expire_passed_over(event_id: int, *, held_since: datetime, now: datetime) -> int:
    """Fans passed over while away who did not come back within their hold (they are out of
    the hot index already: nothing to forget there). Index entry_passed_over."""
    due = QueueEntry.objects.filter(
        event_id=event_id, status=EntryStatus.WAITING, passed_over_at__lte=held_since
    )
    if not due.exists():
        return 0  # the usual tick: one index probe, no transaction
    with transaction.atomic():
        # Locked until the expiry commits: a fan coming back at this instant (away_back's
        # compare-and-set) waits, then finds the place ended, never both.
        ids = list(due.select_for_update(skip_locked=True).values_list("id", flat=True)[:BATCH])
        if not ids:
            return 0
        return len(_expire(event_id, ids, (EntryStatus.WAITING,), "no_heartbeat", now))


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
