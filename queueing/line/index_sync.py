"""Keeping the hot index in step with PostgreSQL after each commit: adds, removals, the
stale flag when Redis missed a write, and healing the front of each tier.

Each change is committed to PostgreSQL with its audit record first; the hot index is updated
after the commit. When that Redis write fails, the event is flagged so that the maintenance
task rebuilds its index from PostgreSQL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from django.conf import settings
from django.db import DatabaseError

from events.models import Event
from queueing.hot import line_index
from queueing.hot.client import HotIndexUnavailable
from queueing.hot.line_index import LocateRequest, Placement
from queueing.line.layouts import event_layout
from queueing.models import QueueEntry
from queueing.records.transitions import Moved
from queueing.rules.layout import EventLayout
from queueing.rules.states import QUEUED, EntryStatus

logger = logging.getLogger(__name__)


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
            line_index.remove(event_id, tier_id=tier_id, members=members)
    except HotIndexUnavailable:
        mark_index_dirty(event_id)
        return False
    return True


class IndexedRow(Protocol):
    id: int
    tier_id: int
    order_key: int


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
        for start in range(0, len(entries), settings.WR_INDEX_ADD_CHUNK):
            placements += line_index.locate_many(
                layout,
                [
                    LocateRequest(
                        member=entry.id,
                        tier_id=entry.tier_id,
                        heartbeat_deadline=heartbeat_deadline,
                        add=add,
                        order_key=entry.order_key,
                    )
                    for entry in entries[start : start + settings.WR_INDEX_ADD_CHUNK]
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
        members = line_index.head_members(layout, count=settings.WR_INDEX_HEAD_CHECK)
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
