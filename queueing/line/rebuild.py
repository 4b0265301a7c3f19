"""Rebuilding an event's hot index from PostgreSQL, and deciding which events need it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from events.models import Event, EventControl
from queueing.hot import epoch
from queueing.hot.client import HotIndexUnavailable
from queueing.hot.epoch import RebuildSuperseded
from queueing.hot.line_index import IndexState
from queueing.line.activity import events_with_fans
from queueing.line.followups import rebuild_soon
from queueing.line.index_sync import mark_index_dirty
from queueing.line.layouts import event_layout
from queueing.models import QueueEntry
from queueing.rules.states import QUEUED, EntryStatus

logger = logging.getLogger(__name__)


def hot_index_rebuild(*, event_id: int, now: datetime | None = None) -> bool:
    """Reload an event's hot index from PostgreSQL. False if another rebuild holds the lock,
    Redis is unreachable, or Redis was flushed again meanwhile (the next check retries)."""
    now = now or timezone.now()
    layout = event_layout(event_id, fresh=True)
    if layout is None:
        return False
    try:
        handle = epoch.rebuild_begin(
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

    def deadline() -> float:
        # A grace period from now, not from the start: a long rebuild must not hand its
        # last chunks deadlines that have already passed. Counted from after Redis answers
        # again, it also makes good the heartbeats Redis could not record during an outage
        # (line/heartbeat_gaps.py).
        return now.timestamp() + (time.monotonic() - started) + layout.heartbeat_seconds

    try:
        _load_overlapped(handle, _queued_lines(event_id, chunk=settings.WR_REBUILD_BATCH), deadline)
        promoted = epoch.rebuild_finish(handle)
    except (HotIndexUnavailable, RebuildSuperseded):
        promoted = False
        epoch.rebuild_abandon(handle)
    except BaseException:
        epoch.rebuild_abandon(handle)
        mark_index_dirty(event_id)
        raise
    if not promoted:
        mark_index_dirty(event_id)
        return False
    logger.info("rebuilt hot index of event %s", event_id)
    return True


# Chunks handed to Redis at once: while Redis adds one chunk (its own CPU, the GIL free),
# this process reads and packs the next, which halves a long rebuild.
LOADS_IN_FLIGHT = 2


def _load_overlapped(
    handle: epoch.Rebuild,
    chunks: Iterator[dict[int | None, list[int]]],
    deadline: Callable[[], float],
) -> None:
    """``epoch.rebuild_load`` every chunk, up to ``LOADS_IN_FLIGHT`` at a time (the order
    does not matter: every add is NX, and tombstones are checked in Redis); the first
    failure stops the loading and is raised."""
    with ThreadPoolExecutor(max_workers=LOADS_IN_FLIGHT) as loaders:
        in_flight: list[Future[int]] = []
        try:
            for lines in chunks:
                if len(in_flight) >= LOADS_IN_FLIGHT:
                    in_flight.pop(0).result()
                in_flight.append(
                    loaders.submit(epoch.rebuild_load, handle, lines, heartbeat_deadline=deadline())
                )
            for loading in in_flight:
                loading.result()
        finally:
            for loading in in_flight:
                loading.cancel()


def _queued_lines(event_id: int, *, chunk: int) -> Iterator[dict[int | None, list[int]]]:
    """The event's entries in line, streamed from one query (a server-side cursor: one pass
    however long the line, where pages of it would each scan anew), ``chunk`` at a time, by
    where they go in the index (``epoch.RebuildLines``)."""
    rows = (
        QueueEntry.objects.filter(event_id=event_id, status__in=QUEUED)
        .values_list("id", "tier_id", "status", "order_key")
        .iterator(chunk_size=chunk)
    )
    prequeue = EntryStatus.PREQUEUE.value
    lines: dict[int | None, list[int]] = {}
    held = 0
    for entry_id, tier_id, status, order_key in rows:
        target = None if status == prequeue else tier_id
        pairs = lines.get(target)
        if pairs is None:
            pairs = lines[target] = []
        pairs += (order_key, entry_id)
        held += 1
        if held == chunk:
            yield lines
            lines, held = {}, 0
    if held:
        yield lines


def hot_index_maintain(*, now: datetime | None = None) -> list[int]:
    """Rebuild the index of every event with fans that Redis lost, or that was flagged stale.
    Returns the ids of the events rebuilt.

    Only on-sales with fans in the room (or flagged) are looked at, so the check costs what
    the busy ones cost. An idle on-sale whose index Redis lost is rebuilt once a fan joins it:
    the join makes it busy, and the fan's first poll asks for the rebuild at once."""
    events = list(
        Event.objects.filter(Q(pk__in=events_with_fans()) | Q(hot_index_dirty=True))
        .exclude(control=EventControl.CLOSED)
        .values_list("id", "hot_index_dirty")
    )
    if not events:
        return []
    try:
        states = epoch.epoch_states([event_id for event_id, _ in events])
        unlocked = epoch.rebuilds_unlocked([event_id for event_id, _ in events])
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


def request_rebuild(event_id: int) -> None:
    """Ask a worker to rebuild the event's index, once per few seconds across all processes."""
    try:
        if epoch.request_rebuild_once(event_id, within_seconds=settings.WR_REBUILD_REQUEST_SECONDS):
            rebuild_soon(event_id)
    except Exception:
        # Never fail a fan's answer over this: the periodic check rebuilds anyway.
        logger.warning("could not ask for a rebuild of event %s", event_id, exc_info=True)
