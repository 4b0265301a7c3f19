"""Reads of the line: positions and counts, from the hot index or, when it cannot answer,
from PostgreSQL. Reads never write: asking for a rebuild is the callers' business.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Q

from events.models import Event, EventState, Tier
from queueing.hot import line_index
from queueing.hot.client import HotIndexUnavailable
from queueing.hot.line_index import IndexState, LineCounts
from queueing.line.layouts import event_layout
from queueing.line.snapshots import LineSnapshot, line_snapshot
from queueing.line.throughput import current_throughput
from queueing.models import QueueEntry
from queueing.rules.eta import Eta, estimate_wait
from queueing.rules.layout import EventLayout
from queueing.rules.positions import SketchedPosition, position_in_line
from queueing.rules.states import EntryStatus

logger = logging.getLogger(__name__)


def position_from_database(entry: QueueEntry, layout: EventLayout) -> int:
    """The fan's position counted in PostgreSQL: O(position), for small lines only."""
    tiers_ahead = []
    for tier in layout.tiers:
        if tier.id == entry.tier_id:
            break
        tiers_ahead.append(tier.id)
    ahead = QueueEntry.objects.filter(
        Q(tier_id__in=tiers_ahead) | Q(tier_id=entry.tier_id, order_key__lt=entry.order_key),
        event_id=entry.event_id,
        status=EntryStatus.WAITING,
    ).count()
    return ahead + 1


def entry_return_url(*, entry_id: int, event_id: int) -> str:
    """The return URL kept with an entry ("" = none, or no such entry)."""
    found = (
        QueueEntry.objects.filter(pk=entry_id, event_id=event_id)
        .values_list("return_url", flat=True)
        .first()
    )
    return found or ""


@dataclass(frozen=True)
class PageFacts:
    """What only the waiting page needs of an entry (never the hot status path)."""

    holder_key: str  # which browser shows the place ("" until it was moved)
    notify_email: str  # the address left for "it's your turn" ("" for none)
    status: EntryStatus
    event_id: int


def entry_page_facts(entry_id: int) -> PageFacts | None:
    row = (
        QueueEntry.objects.filter(pk=entry_id)
        .values_list("holder_key", "notify_email", "status", "event_id")
        .first()
    )
    if row is None:
        return None
    return PageFacts(
        holder_key=row[0], notify_email=row[1], status=EntryStatus(row[2]), event_id=row[3]
    )


def current_counts(layout: EventLayout) -> LineCounts:
    """The line's counts: from the hot index when it is complete, else from the line's
    snapshot (at most ``WR_DEGRADED_SNAPSHOT_SECONDS`` old; line/snapshots.py)."""
    hot = hot_counts(layout)
    return hot if hot is not None else line_snapshot(layout).counts(layout)


def degraded_position(
    entry: QueueEntry, layout: EventLayout, snapshot: LineSnapshot
) -> SketchedPosition:
    """A waiting fan's position while the hot index cannot answer: counted in PostgreSQL
    while the line is short (``WR_DEGRADED_EXACT_LINE``; cheap, and exact), else placed
    from the line's snapshot in memory."""
    if snapshot.waiting <= settings.WR_DEGRADED_EXACT_LINE:
        return SketchedPosition(position=position_from_database(entry, layout), exact=True)
    return snapshot.position(layout, tier_id=entry.tier_id, order_key=entry.order_key)


def lines_counts(layouts: Sequence[EventLayout]) -> dict[int, LineCounts]:
    """Each line's counts, by event id: from the hot index where it is complete; the lines it
    cannot answer for are counted in PostgreSQL together, in one grouped query."""
    counts: dict[int, LineCounts] = {}
    for layout in layouts:
        hot = hot_counts(layout)
        if hot is not None:
            counts[layout.event_id] = hot
    missing = [layout for layout in layouts if layout.event_id not in counts]
    if missing:
        counts.update(_database_counts(missing))
    return counts


def _database_counts(layouts: Sequence[EventLayout]) -> dict[int, LineCounts]:
    rows = (
        QueueEntry.objects.filter(
            event_id__in=[layout.event_id for layout in layouts],
            status__in=[EntryStatus.WAITING, EntryStatus.PREQUEUE],
        )
        .values_list("event_id", "status", "tier_id")
        .annotate(n=Count("id"))
        .values_list("event_id", "status", "tier_id", "n")
    )
    prequeue: dict[int, int] = {}
    waiting: dict[tuple[int, int], int] = {}
    for event_id, status, tier_id, n in rows:
        if status == EntryStatus.PREQUEUE:
            prequeue[event_id] = prequeue.get(event_id, 0) + n
        else:
            waiting[(event_id, tier_id)] = n
    return {
        layout.event_id: LineCounts(
            state=IndexState.MISSING,
            prequeue=prequeue.get(layout.event_id, 0),
            tiers=tuple(waiting.get((layout.event_id, tier.id), 0) for tier in layout.tiers),
        )
        for layout in layouts
    }


def hot_counts(layout: EventLayout) -> LineCounts | None:
    """The hot index's counts when it is complete, else None."""
    try:
        counts = line_index.line_counts(layout)
    except HotIndexUnavailable:
        return None
    return counts if counts.state is IndexState.READY else None


def active_count(event_id: int) -> int:
    return active_counts([event_id])[event_id]


def active_counts(event_ids: Collection[int]) -> dict[int, int]:
    """Fans in the shop per event, in one grouped count (index on event, status)."""
    rows = (
        QueueEntry.objects.filter(event_id__in=event_ids, status=EntryStatus.ADMITTED)
        .values_list("event_id")
        .annotate(n=Count("id"))
        .values_list("event_id", "n")
    )
    return {event_id: 0 for event_id in event_ids} | dict(rows)


@dataclass(frozen=True)
class EventPublicView:
    state: EventState
    queue_length: int
    active: int
    eta_new: Eta | None


def event_public_view(event: Event, *, now: datetime) -> EventPublicView:
    layout = event_layout(event.id)
    counts = current_counts(layout) if layout else None
    eta_new = None
    state = event.state_at(now)
    if state != EventState.PAUSED and layout is not None and counts is not None and layout.tiers:
        default = next((t for t in layout.tiers if t.id in _default_tier_ids(event.id)), None)
        if default is not None:
            index = layout.tier_index(default.id) or 0
            position = position_in_line(
                layout,
                tier_id=default.id,
                rank_in_tier=counts.tiers[index] if index < len(counts.tiers) else 0,
                tier_counts=counts.tiers,
            )
            eta_new = estimate_wait(position, current_throughput(layout), default.id)
    return EventPublicView(
        state=state,
        queue_length=counts.queue_length if counts else 0,
        active=active_count(event.id),
        eta_new=eta_new,
    )


def _default_tier_ids(event_id: int) -> set[int]:
    return set(Tier.objects.filter(event_id=event_id, is_default=True).values_list("id", flat=True))
