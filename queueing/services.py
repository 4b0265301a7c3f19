"""Tickets' views, leaving the line, and rebuilding the hot index (joins: joining.py).

Each change is committed to PostgreSQL with its audit record first; the hot index is updated
after the commit. When that Redis write fails, the event is flagged so that the maintenance
task rebuilds its index from PostgreSQL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from config.api_errors import ApiError
from events.models import Event, EventControl
from queueing import hot_index
from queueing.eta import Eta, Throughput, estimate_wait
from queueing.hot_index import (
    HotIndexUnavailable,
    IndexedEntry,
    IndexState,
    LocateRequest,
    Placement,
    RebuildSuperseded,
    Where,
)
from queueing.layout import EventLayout, event_layout
from queueing.models import AuditAction, QueueEntry
from queueing.pass_services import IssuedPass, entry_pass
from queueing.polling import poll_after_seconds
from queueing.positions import position_in_line
from queueing.selectors import (
    current_counts,
    position_from_database,
    request_rebuild,
)
from queueing.states import QUEUED, EntryStatus
from queueing.throughput import current_throughput
from queueing.tickets import TicketRef, ticket_issue
from queueing.transitions import Moved, transition_audited

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TicketView:
    """What a fan is told about a ticket."""

    ticket: str
    event_slug: str
    status: EntryStatus
    position: int | None
    queue_length: int
    poll_after_seconds: float
    eta: Eta | None = None
    issued_pass: IssuedPass | None = None
    # Where the fan stands in its tier's order (for pages placing themselves from ticks).
    tier_id: int | None = None
    order_key: int | None = None


def mark_index_dirty(event_id: int) -> None:
    """The index missed a write: the maintenance task rebuilds it from PostgreSQL."""
    logger.warning("hot index of event %s is stale; flagged for rebuild", event_id)
    Event.objects.filter(pk=event_id).update(hot_index_dirty=True)


def index_forget(event_id: int, moved: Iterable[Moved | QueueEntry]) -> bool:
    """Take entries that left the line (admitted, expired, revoked...) out of the hot index.
    False, with the event flagged for a rebuild, when Redis could not be written."""
    by_tier: dict[int, list[int]] = {}
    for entry in moved:
        by_tier.setdefault(entry.tier_id, []).append(entry.id)
    try:
        for tier_id, members in by_tier.items():
            hot_index.remove(event_id, tier_id=tier_id, members=members)
    except HotIndexUnavailable:
        mark_index_dirty(event_id)
        return False
    return True


class IndexedRow(Protocol):
    id: int
    tier_id: int
    order_key: int


# Entries added per pipeline: one round trip each, bounded in size.
INDEX_ADD_CHUNK = 1000


def index_add(
    layout: EventLayout,
    entries: Sequence[IndexedRow],
    *,
    add: Literal["tier", "pre"],
    heartbeat_deadline: float,
) -> list[Placement | None]:
    """Add committed entries to the hot index (a pipeline per thousand); where each now
    stands, or None for all when Redis could not be written (the index is flagged stale).

    The add runs after the commit: a fan who left the line in between (admitted by a fast
    admission run, say) had that removal run before the add, which is taken back here, or
    the index would show a ghost.
    """
    placements: list[Placement | None] = []
    try:
        for start in range(0, len(entries), INDEX_ADD_CHUNK):
            placements += hot_index.locate_many(
                layout,
                [
                    LocateRequest(
                        member=entry.id,
                        tier_id=entry.tier_id,
                        heartbeat_deadline=heartbeat_deadline,
                        add=add,
                        order_key=entry.order_key,
                    )
                    for entry in entries[start : start + INDEX_ADD_CHUNK]
                ],
            )
    except HotIndexUnavailable:
        _flag_stale(layout.event_id)
        return [None] * len(entries)
    try:
        gone = list(
            QueueEntry.objects.filter(pk__in=[entry.id for entry in entries])
            .exclude(status__in=QUEUED)
            .only("id", "tier_id")
        )
        if gone:
            index_forget(layout.event_id, gone)
    except DatabaseError:
        # PostgreSQL went away after the commit: the entries stand; a ghost this check
        # would have removed is taken out at the front of the line by the next tick's heal.
        logger.warning("could not check the entries just indexed for event %s", layout.event_id)
    return placements


def _flag_stale(event_id: int) -> None:
    try:
        mark_index_dirty(event_id)
    except DatabaseError:
        logger.warning("could not flag the index of event %s as stale", event_id)


def layout_with_tier(event_id: int, *tier_ids: int) -> EventLayout:
    """The event's layout, read again if it does not know these tiers yet (just added)."""
    layout = event_layout(event_id)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        layout = event_layout(event_id, fresh=True)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        raise ApiError(404, "ticket_not_found", "No such ticket.")
    return layout


def entry_view(
    entry: QueueEntry, *, now: datetime, layout: EventLayout | None = None
) -> TicketView:
    """Describe an entry whose row is at hand, refreshing its heartbeat in the hot index."""
    layout = layout or layout_with_tier(entry.event_id, entry.tier_id)
    placement = None
    if entry.status in QUEUED:
        try:
            placement = hot_index.locate(
                layout,
                member=entry.id,
                tier_id=entry.tier_id,
                heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds,
            )
        except HotIndexUnavailable:
            placement = None
    return entry_view_placed(entry, now=now, layout=layout, placement=placement)


def entry_view_placed(
    entry: QueueEntry, *, now: datetime, layout: EventLayout, placement: Placement | None
) -> TicketView:
    """Describe an entry from its row and where the hot index has it (None: no answer)."""
    status = EntryStatus(entry.status)
    position: int | None = None
    queue_length: int | None = None
    if status in QUEUED:
        if placement is not None and placement.counts.state is IndexState.MISSING:
            request_rebuild(entry.event_id)
        if (
            placement is not None
            and placement.counts.state is IndexState.READY
            and placement.where is not Where.NOWHERE
        ):
            queue_length = placement.counts.queue_length
            position = _position_in_tier_queue(layout, entry.tier_id, placement)
        elif status == EntryStatus.WAITING:
            position = position_from_database(entry, layout)
    if queue_length is None:
        # From the hot index when it is whole; PostgreSQL only in degraded mode.
        queue_length = current_counts(layout).queue_length
    issued = None
    if status == EntryStatus.ADMITTED:
        issued = entry_pass(entry, event=Event.objects.get(pk=entry.event_id), now=now)
    return _view(
        ticket_issue(TicketRef(entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id)),
        layout,
        status,
        position,
        queue_length,
        throughput=current_throughput(layout) if position is not None else None,
        tier_id=entry.tier_id,
        order_key=entry.order_key if status in QUEUED else None,
        issued=issued,
    )


def entry_view_unplaced(
    entry: QueueEntry, *, layout: EventLayout, placement: Placement | None
) -> TicketView:
    """An entry described without any further read (what a join can still answer when
    PostgreSQL or Redis failed right after its commit): its ticket and status."""
    counts = placement.counts if placement is not None else None
    return _view(
        ticket_issue(TicketRef(entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id)),
        layout,
        EntryStatus(entry.status),
        None,
        counts.queue_length if counts is not None and counts.state is IndexState.READY else 0,
        throughput=None,
        tier_id=entry.tier_id,
        order_key=entry.order_key,
    )


def _view(
    ticket: str,
    layout: EventLayout,
    status: EntryStatus,
    position: int | None,
    queue_length: int,
    *,
    throughput: Throughput | None,
    tier_id: int,
    order_key: int | None,
    issued: IssuedPass | None = None,
) -> TicketView:
    eta = None if position is None else estimate_wait(position, throughput)
    return TicketView(
        ticket=ticket,
        event_slug=layout.slug,
        status=status,
        position=position,
        queue_length=queue_length,
        poll_after_seconds=poll_after_seconds(
            heartbeat_seconds=layout.heartbeat_seconds, position=position
        ),
        eta=eta,
        issued_pass=issued,
        tier_id=tier_id,
        order_key=order_key,
    )


def _position_in_tier_queue(layout: EventLayout, tier_id: int, placement: Placement) -> int | None:
    """The fan's place in the whole line, when the index found them in their tier's queue."""
    if placement.where is not Where.TIER or placement.rank is None:
        return None
    return position_in_line(
        layout, tier_id=tier_id, rank_in_tier=placement.rank, tier_counts=placement.counts.tiers
    )


def hot_ticket_view(
    *,
    ref: TicketRef,
    ticket: str,
    layout: EventLayout,
    placement: Placement,
    throughput: Throughput | None,
) -> TicketView | None:
    """What the hot index alone can tell a fan in line (waiting or in the pre-queue); None
    when it cannot answer (not there, being rebuilt): then the database must be read.
    Pure, so that the lean ASGI status path and ``ticket_status`` share it."""
    if placement.counts.state is not IndexState.READY:
        return None
    position = _position_in_tier_queue(layout, ref.tier_id, placement)
    if position is not None:
        status = EntryStatus.WAITING
    elif placement.where is Where.PREQUEUE:
        position, status = None, EntryStatus.PREQUEUE
    else:
        return None
    return _view(
        ticket,
        layout,
        status,
        position,
        placement.counts.queue_length,
        throughput=throughput,
        tier_id=ref.tier_id,
        order_key=placement.order_key,
    )


def ticket_status(*, ref: TicketRef, ticket: str, now: datetime) -> TicketView:
    """The hot path: answered from the hot index alone while the fan is in line there; the
    database is read only when the index cannot answer (admitted, ended, or being rebuilt)."""
    layout = layout_with_tier(ref.event_id, ref.tier_id)
    try:
        placement = hot_index.locate(
            layout,
            member=ref.entry_id,
            tier_id=ref.tier_id,
            heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds,
        )
    except HotIndexUnavailable:
        placement = None
    if placement is not None:
        view = hot_ticket_view(
            ref=ref,
            ticket=ticket,
            layout=layout,
            placement=placement,
            throughput=current_throughput(layout),
        )
        if view is not None:
            return view
    entry = (
        QueueEntry.objects.filter(pk=ref.entry_id, event_id=ref.event_id)
        .select_related("tier")
        .first()
    )
    if entry is None:
        raise ApiError(404, "ticket_not_found", "No such ticket.")
    return entry_view(entry, now=now, layout=layout)


_LEAVE_OUTCOME: dict[EntryStatus, tuple[EntryStatus, AuditAction]] = {
    EntryStatus.PREQUEUE: (EntryStatus.LEFT, AuditAction.LEFT),
    EntryStatus.WAITING: (EntryStatus.LEFT, AuditAction.LEFT),
    # Leaving after admission gives the slot back.
    EntryStatus.ADMITTED: (EntryStatus.ABANDONED, AuditAction.ABANDONED),
}


def entry_leave(*, ref: TicketRef, now: datetime) -> bool:
    """The fan leaves. True if this call ended the ticket; False if it was already over."""
    for _attempt in range(3):
        entry = QueueEntry.objects.filter(pk=ref.entry_id, event_id=ref.event_id).first()
        if entry is None or entry.status not in _LEAVE_OUTCOME:
            return False
        current = EntryStatus(entry.status)
        new_status, action = _LEAVE_OUTCOME[current]
        moved = transition_audited(
            event_id=entry.event_id,
            ids=[entry.id],
            to=new_status,
            expected=(current,),
            now=now,
            action=action,
            actor="fan",
            data=lambda m: {"from": m.previous},
        )
        if not moved:
            continue  # changed under us (admitted, expired...): look again
        index_forget(entry.event_id, moved)
        return True
    raise ApiError(409, "conflict", "The ticket kept changing; please retry.")


def hot_index_rebuild(*, event_id: int, now: datetime | None = None) -> bool:
    """Reload an event's hot index from PostgreSQL. False if another rebuild holds the lock,
    Redis is unreachable, or Redis was flushed again meanwhile (the next check retries)."""
    now = now or timezone.now()
    layout = event_layout(event_id, fresh=True)
    if layout is None:
        return False
    try:
        handle = hot_index.rebuild_begin(
            event_id,
            tier_ids=[tier.id for tier in layout.tiers],
            lock_seconds=settings.WR_REBUILD_LOCK_SECONDS,
        )
    except HotIndexUnavailable:
        return False
    if handle is None:
        return False
    # Cleared before loading: a Redis write that fails during the load flags it again, and
    # so does a failed rebuild (below); a killed one is noticed by its lapsed lock.
    Event.objects.filter(pk=event_id).update(hot_index_dirty=False)
    started = time.monotonic()
    last_id = 0
    try:
        while True:
            rows = list(
                QueueEntry.objects.filter(event_id=event_id, status__in=QUEUED, id__gt=last_id)
                .order_by("id")
                .values_list("id", "tier_id", "status", "order_key")[: settings.WR_REBUILD_BATCH]
            )
            if not rows:
                break
            hot_index.rebuild_load(
                handle,
                [
                    IndexedEntry(
                        member=entry_id,
                        tier_id=None if status == EntryStatus.PREQUEUE else tier_id,
                        order_key=order_key,
                    )
                    for entry_id, tier_id, status, order_key in rows
                ],
                # A grace period from now, not from the start: a long rebuild must not
                # hand its last batches deadlines that have already passed.
                heartbeat_deadline=now.timestamp()
                + (time.monotonic() - started)
                + layout.heartbeat_seconds,
            )
            last_id = rows[-1][0]
        promoted = hot_index.rebuild_finish(handle)
    except (HotIndexUnavailable, RebuildSuperseded):
        promoted = False
        hot_index.rebuild_abandon(handle)
    except BaseException:
        hot_index.rebuild_abandon(handle)
        mark_index_dirty(event_id)
        raise
    if not promoted:
        mark_index_dirty(event_id)
        return False
    logger.info("rebuilt hot index of event %s", event_id)
    return True


HEAD_CHECK_SIZE = 64


def index_heal_head(*, event_id: int) -> int:
    """Take out of the front of each tier anyone PostgreSQL says is no longer waiting.

    Admission removes fans from the index after its commit; a process that died in between
    (or any other missed removal) would leave a ghost at the front, where every fan behind it
    would see their place one too far back. Checked every tick, so ghosts do not last.
    """
    layout = event_layout(event_id)
    if layout is None:
        return 0
    try:
        members = hot_index.head_members(layout, count=HEAD_CHECK_SIZE)
    except HotIndexUnavailable:
        return 0
    if not members:
        return 0
    ghosts = list(
        QueueEntry.objects.filter(pk__in=members)
        .exclude(status=EntryStatus.WAITING)
        .only("id", "tier_id")
    )
    unknown = set(members) - set(
        QueueEntry.objects.filter(pk__in=members).values_list("id", flat=True)
    )
    if ghosts:
        index_forget(event_id, ghosts)
    if unknown:
        mark_index_dirty(event_id)  # ids PostgreSQL has never seen: rebuild outright
    return len(ghosts)


def hot_index_maintain(*, now: datetime | None = None) -> list[int]:
    """Rebuild the index of every event that Redis lost or that was flagged stale.
    Returns the ids of the events rebuilt."""
    events = list(
        Event.objects.exclude(control=EventControl.CLOSED).values_list("id", "hot_index_dirty")
    )
    if not events:
        return []
    try:
        states = hot_index.epoch_states([event_id for event_id, _ in events])
        unlocked = hot_index.rebuilds_unlocked([event_id for event_id, _ in events])
    except HotIndexUnavailable:
        return []
    rebuilt = []
    for event_id, dirty in events:
        state = states[event_id]
        # Building with nobody holding the rebuild lock: the rebuilding worker died.
        orphaned = state is IndexState.BUILDING and event_id in unlocked
        if dirty or state is IndexState.MISSING or orphaned:
            if hot_index_rebuild(event_id=event_id, now=now):
                rebuilt.append(event_id)
    return rebuilt
