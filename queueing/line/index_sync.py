"""Keeping the hot index in step with PostgreSQL: after each commit, and rebuilt whole when it
is lost. The one place where a write to the hot index that fails is answered for.

- **After each commit.** Each change is committed to PostgreSQL with its audit record first;
  the hot index is updated after the commit (``index_add``, ``index_forget``; a line
  revoked after a close leaves it whole, ``index_line_drop``). When that
  Redis write fails, the event is flagged (``mark_index_dirty``) so that the maintenance task
  rebuilds its index from PostgreSQL. Each tick heals the front of every tier
  (``index_heal_head``). Writes whose loss costs nothing (a heartbeat of an entry already
  gone, the measured pace) are simply let go (``index_forget_heartbeats``, ``pace_record``).
- **Rebuilt whole** (``hot_index_rebuild``): under a lock, the epoch marked ``building``, the
  entries in line streamed from one query in chunks, two in flight; promoted to ``ready``
  only if the epoch is still its own. ``hot_index_maintain`` finds the on-sales that need it
  (lost by Redis, flagged, or an orphaned build); a fan's poll asks for one at once
  (``request_rebuild``).

Over 350 lines on purpose: the one seam of every write to the hot index after a commit and of
the rebuild; split in two, a failed write would be answered for in two places.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Literal, Protocol

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Q
from django.utils import timezone

from events.models import Event, EventControl
from queueing.hot import epoch, line_index, stats
from queueing.hot.client import HotIndexUnavailable, answered
from queueing.hot.epoch import RebuildSuperseded
from queueing.hot.line_index import IndexState, LocateRequest, Placement, Where
from queueing.line.activity import events_with_fans
from queueing.line.followups import rebuild_soon
from queueing.line.join_views import join_views
from queueing.line.lanes import placement_in_line
from queueing.line.reads import event_layout
from queueing.models import QueueEntry
from queueing.records.bulk_ends import Ended
from queueing.records.entry_reads import IN_ORDER
from queueing.records.transitions import Moved
from queueing.rules.eta import Throughput
from queueing.rules.layout import EventLayout
from queueing.rules.states import QUEUED, EntryStatus

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------- after each commit


def mark_index_dirty(event_id: int) -> None:
    """The index missed a write: the maintenance task rebuilds it from PostgreSQL."""
    logger.warning("hot index of event %s is stale; flagged for rebuild", event_id)
    Event.objects.filter(pk=event_id).update(hot_index_dirty=True)


def index_forget(event_id: int, moved: Iterable[Moved | Ended | QueueEntry]) -> bool:
    """Take entries that left the line (admitted, expired, revoked...) out of the hot index:
    one script per lane and tier, all in one round trip. False, with the event flagged for
    a rebuild, when Redis could not be written."""
    by_lane_tier: dict[tuple[int, int], list[int]] = {}
    for entry in moved:
        by_lane_tier.setdefault((entry.lane, entry.tier_id), []).append(entry.id)
    if not by_lane_tier:
        return True
    done, _ = answered(line_index.remove_many, event_id, by_lane_tier)
    if not done:
        mark_index_dirty(event_id)
        return False
    return True


def index_line_drop(event_id: int) -> bool:
    """The whole line left it (revoked after a close): the hot index drops every lane's
    sorted sets whole, in one round trip, however long the line was. False, with the event
    flagged for a rebuild, when Redis could not be written. The one place a line leaves the
    index at once."""
    layout = event_layout(event_id)
    if layout is None:
        return True
    done, _ = answered(
        line_index.line_drop,
        event_id,
        tier_ids=[tier.id for tier in layout.tiers],
        lanes=layout.lanes,
    )
    if not done:
        _flag_stale(event_id)
    return done


def index_admitted_count(event_id: int, admitted: Iterable[Moved], *, lanes: int) -> None:
    """In a line of several lanes, every lane hears how many were let in from each lane and
    tier (``line_index.admitted_count``). Nothing to do in a line of one lane: its poll
    counts the whole line itself. A failed write costs exactness until the next summary."""
    if lanes <= 1:
        return
    let_in: dict[tuple[int, int], int] = {}
    for entry in admitted:
        let_in[(entry.lane, entry.tier_id)] = let_in.get((entry.lane, entry.tier_id), 0) + 1
    if let_in:
        answered(line_index.admitted_count, event_id, let_in, lanes=lanes)


class IndexedRow(Protocol):
    id: int
    tier_id: int
    order_key: int
    lane: int


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
    for start in range(0, len(entries), settings.WR_INDEX_ADD_CHUNK):
        done, placed = answered(
            line_index.locate_many,
            layout,
            [
                LocateRequest(
                    member=entry.id,
                    tier_id=entry.tier_id,
                    heartbeat_deadline=heartbeat_deadline,
                    add=add,
                    order_key=entry.order_key,
                    lane=entry.lane,
                )
                for entry in entries[start : start + settings.WR_INDEX_ADD_CHUNK]
            ],
        )
        if not done or placed is None:
            _flag_stale(layout.event_id)
            return [None] * len(entries)
        chunk = entries[start : start + settings.WR_INDEX_ADD_CHUNK]
        # Beside other lanes, the fans now in line are counted in every other lane at once:
        # the summary does not hold who joined them in the last second (line/lanes.py).
        views = join_views(
            layout,
            [
                (entry.id, entry.lane, entry.tier_id, entry.order_key)
                for entry, placement in zip(chunk, placed, strict=True)
                if placement.where is Where.TIER
            ],
        )
        placements += [
            placement_in_line(
                layout,
                replace(placement, view=views.get(entry.id, placement.view)),
                lane=entry.lane,
                tier_id=entry.tier_id,
            )
            for entry, placement in zip(chunk, placed, strict=True)
        ]
    try:
        gone = list(
            QueueEntry.objects.filter(pk__in=[entry.id for entry in entries])
            .exclude(status__in=QUEUED)
            .only("id", "tier_id", "lane")
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
    _, members = answered(line_index.head_members, layout, count=settings.WR_INDEX_HEAD_CHECK)
    if not members:
        return 0
    in_index = QueueEntry.objects.filter(pk__in=members)
    ghosts = list(in_index.exclude(IN_ORDER).only("id", "tier_id", "lane"))
    unknown = set(members) - set(in_index.values_list("id", flat=True))
    if ghosts:
        index_forget(event_id, ghosts)
    if unknown:
        mark_index_dirty(event_id)  # ids PostgreSQL has never seen: rebuild outright
    return len(ghosts)


def index_holder_moved(event_id: int, entry_id: int, holder: str, *, lane: int = 0) -> None:
    """The place now shows in the browser holding ``holder`` (line/place_links.py): the index
    sends the place's other tickets to PostgreSQL, which refuses them. If Redis cannot be
    written the event is flagged for a rebuild, which writes it; until then the old ticket
    may be told its place while it waits, never handed a pass (only the entry's row does)."""
    done, _ = answered(line_index.holders_set, event_id, {entry_id: holder}, lane=lane)
    if not done:
        _flag_stale(event_id)


def index_forget_heartbeats(event_id: int, members: Sequence[int], *, lane: int = 0) -> None:
    """Drop the heartbeats of entries (of one lane) PostgreSQL has never seen; left to expire
    if Redis is away (they name nobody)."""
    answered(line_index.forget_heartbeats, event_id, members, lane=lane)


def pace_record(event_id: int, throughput: Throughput) -> None:
    """The pace an admission run measured, for everyone's quotes; while Redis is away the
    quotes go by the configured pace until the next run writes it."""
    answered(stats.write_throughput, event_id, throughput)


def index_mark_new_event_ready(event_id: int, *, lanes: int = 1) -> None:
    """A new on-sale's (empty) index is whole from the start, in each of its lanes; if Redis
    is away, the maintenance task builds it when Redis is back."""
    answered(epoch.mark_new_event_ready, event_id, lanes=lanes)


# ----------------------------------------------------------------------- rebuilt whole


def hot_index_rebuild(*, event_id: int, now: datetime | None = None) -> bool:
    """Reload an event's hot index from PostgreSQL. False if another rebuild holds the lock,
    Redis is unreachable, or Redis was flushed again meanwhile (the next check retries)."""
    now = now or timezone.now()
    layout = event_layout(event_id, fresh=True)
    if layout is None:
        return False
    _, handle = answered(
        epoch.rebuild_begin,
        event_id,
        tier_ids=[tier.id for tier in layout.tiers],
        lock_seconds=settings.WR_REBUILD_LOCK_SECONDS,
        lanes=layout.lanes,
    )
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
        # (line/expiry.py).
        return now.timestamp() + (time.monotonic() - started) + layout.heartbeat_seconds

    moved: dict[int, dict[int, str]] = {}
    try:
        _load_overlapped(
            handle, _queued_lines(event_id, chunk=settings.WR_REBUILD_BATCH, moved=moved), deadline
        )
        for lane, holders in moved.items():
            line_index.holders_set(event_id, holders, lane=lane)
        promoted = epoch.rebuild_finish(handle)
    except (HotIndexUnavailable, RebuildSuperseded):
        promoted = False
        epoch.rebuild_abandon(handle)
    except BaseException:
        epoch.rebuild_abandon(handle)
        mark_index_dirty(event_id)
        raise
    # waitingroom_hot_index_rebuilds_total and _rebuild_seconds: finished or given up.
    stats.rebuild_observe(time.monotonic() - started)
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
    chunks: Iterator[dict[tuple[int, int | None], list[int]]],
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


def _queued_lines(
    event_id: int, *, chunk: int, moved: dict[int, dict[int, str]]
) -> Iterator[dict[tuple[int, int | None], list[int]]]:
    """The event's entries in line, streamed from one query (a server-side cursor: one pass
    however long the line, where pages of it would each scan anew), ``chunk`` at a time, by
    where they go in the index (``epoch.RebuildLines``: lane, then tier or pre-queue). The
    holder keys of the places moved to another browser are put in ``moved`` on the way, by
    lane (``line_index.holders_set``)."""
    # Fans passed over while away are out of the order until they come back (line/away.py).
    rows = (
        QueueEntry.objects.filter(event_id=event_id, status__in=QUEUED, passed_over_at=None)
        .values_list("id", "tier_id", "status", "order_key", "holder_key", "lane")
        .iterator(chunk_size=chunk)
    )
    prequeue = EntryStatus.PREQUEUE.value
    lines: dict[tuple[int, int | None], list[int]] = {}
    held = 0
    for entry_id, tier_id, status, order_key, holder_key, lane in rows:
        if holder_key:
            moved.setdefault(lane, {})[entry_id] = holder_key
        target = (lane, None if status == prequeue else tier_id)
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
        .values_list("id", "hot_index_dirty", "lanes")
    )
    if not events:
        return []
    event_ids = [event_id for event_id, _, _ in events]
    _, states = answered(
        epoch.epoch_states, event_ids, lanes={event_id: lanes for event_id, _, lanes in events}
    )
    _, unlocked = answered(epoch.rebuilds_unlocked, event_ids)
    if states is None or unlocked is None:
        return []
    rebuilt = []
    for event_id, dirty, _ in events:
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
