"""Reads of the line: positions and counts, from the hot index or, when it cannot answer,
from PostgreSQL."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db.models import Q

from queueing import hot_index
from queueing.hot_index import HotIndexUnavailable, IndexState, LineCounts
from queueing.layout import EventLayout
from queueing.models import QueueEntry
from queueing.states import QUEUED, EntryStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LineSize:
    queue_length: int  # pre-queue plus waiting
    from_hot_index: bool


def position_from_database(entry: QueueEntry, layout: EventLayout) -> int:
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


def queue_length_from_database(event_id: int) -> int:
    return QueueEntry.objects.filter(event_id=event_id, status__in=QUEUED).count()


def line_size(layout: EventLayout) -> LineSize:
    counts = hot_counts(layout)
    if counts is not None:
        return LineSize(queue_length=counts.queue_length, from_hot_index=True)
    return LineSize(queue_length=queue_length_from_database(layout.event_id), from_hot_index=False)


def hot_counts(layout: EventLayout) -> LineCounts | None:
    """The hot index's counts when it is complete, else None (and a rebuild is asked for)."""
    try:
        counts = hot_index.line_counts(layout)
    except HotIndexUnavailable:
        return None
    if counts.state is IndexState.READY:
        return counts
    if counts.state is IndexState.MISSING:
        request_rebuild(layout.event_id)
    return None


def active_count(event_id: int) -> int:
    return QueueEntry.objects.filter(event_id=event_id, status=EntryStatus.ADMITTED).count()


def request_rebuild(event_id: int) -> None:
    """Ask a worker to rebuild the event's index, once per few seconds across all processes."""
    from queueing.tasks import hot_index_rebuild

    try:
        if hot_index.request_rebuild_once(event_id, within_seconds=5):
            hot_index_rebuild.delay(event_id)
    except Exception:
        logger.warning("could not ask for a rebuild of event %s", event_id, exc_info=True)
