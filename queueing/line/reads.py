"""Reading an on-sale and its line, and the one place that decides where each answer comes
from.

**On-sales** (``event_by_slug``, ``event_layout``): found by slug (the queue's own
not-found), and each one's layout, read from PostgreSQL and cached briefly in-process. The
hot status path needs the tier layout to name the Redis keys it counts; reading it from
PostgreSQL on every poll would put the database back on the hot path, and tiers change
rarely.

**The line** (``line_reads``): the hot index (Redis) answers while it can. While it cannot
(Redis away, this process's pool spent, the on-sale's index missing, being rebuilt, or
flagged stale after a missed write), the answer comes from PostgreSQL or from what the
on-sale's settings say:

- ``counts``, ``counts_many``: the sorted sets' sizes; else the line's snapshot, or rows
  counted in one grouped query;
- ``throughput``: the pace the admission runs measured; else what the settings say;
- ``position`` of a fan the index could not place: counted while the line is short, else
  placed from the line's snapshot;
- ``overdue``, ``unseen``: heartbeat deadlines; else nobody is overdue;
- ``sketch`` (a tick's checkpoints): else none, and pages keep their last figures;
- ``line_samples``, ``last_tick``: what the ticks left in Redis; else none.

Callers ask ``line_reads``; none of them catches a Redis failure or chooses for itself (the
heartbeat a poll records is in ``expiry.py``, the writes after a commit in
``index_sync.py``). Reads never write: asking for a rebuild is the callers' business.

Over 350 lines on purpose: every read the line makes, and what it does without Redis, in one
place.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from events.models import Event, EventControl, EventState, Tier
from events.validation import SLUG_RE
from queueing.hot import epoch, line_index, stats
from queueing.hot.client import answered, answered_async
from queueing.hot.line_index import IndexState, LineCounts, LineSketch
from queueing.in_process import ProcessCache, closes_old_connections
from queueing.line.snapshots import LineSnapshot, line_snapshot
from queueing.models import QueueEntry
from queueing.records.entry_reads import (
    active_counts,
    default_tier_ids,
    position_counted,
    waiting_counts,
)
from queueing.rules.errors import EventNotFound, TicketNotFound
from queueing.rules.eta import Eta, Throughput, configured_pace, estimate_wait, settings_throughput
from queueing.rules.layout import EventLayout, SketchedPosition, TierLayout, position_in_line


def event_by_slug(slug: str) -> Event:
    """The on-sale, or the queue's EventNotFound. The slug is checked first: PostgreSQL
    refuses NUL."""
    event = Event.objects.filter(slug=slug).first() if SLUG_RE.match(slug) else None
    if event is None:
        raise EventNotFound()
    return event


_layouts: ProcessCache[int, EventLayout | None] = ProcessCache(
    "layouts", seconds=lambda: settings.WR_LAYOUT_CACHE_SECONDS
)


_EVENT_FIELDS = (
    "id",
    "slug",
    "heartbeat_seconds",
    "away_seconds",
    "rate_per_minute",
    "capacity",
    "session_seconds",
    "message",
    "control",
    "lanes",
    "sold_out_at",
    "sold_out_message",
)


def _build(event: dict[str, Any], tiers: list[Tier]) -> EventLayout:
    return EventLayout(
        event_id=event["id"],
        slug=event["slug"],
        heartbeat_seconds=event["heartbeat_seconds"],
        pace=configured_pace(
            rate_per_minute=event["rate_per_minute"],
            capacity=event["capacity"],
            session_seconds=event["session_seconds"],
        ),
        tiers=tuple(TierLayout(id=t.id, priority=t.priority, share=t.share) for t in tiers),
        settings_pace=settings_throughput(
            rate_per_minute=event["rate_per_minute"],
            capacity=event["capacity"],
            session_seconds=event["session_seconds"],
        ),
        message=event["message"],
        paused=event["control"] == EventControl.PAUSED,
        away_seconds=event["away_seconds"],
        lanes=event["lanes"],
        sold_out_at=event["sold_out_at"],
        sold_out_message=event["sold_out_message"],
    )


def _load_many(event_ids: Collection[int]) -> dict[int, EventLayout | None]:
    """The events' layouts in two queries however many they are (None for a missing event)."""
    layouts: dict[int, EventLayout | None] = dict.fromkeys(event_ids)
    events = list(Event.objects.filter(pk__in=event_ids).values(*_EVENT_FIELDS))
    if not events:
        return layouts
    tiers: dict[int, list[Tier]] = {event["id"]: [] for event in events}
    for tier in Tier.objects.filter(event_id__in=tiers).order_by("priority", "id"):
        tiers[tier.event_id].append(tier)
    for event in events:
        layouts[event["id"]] = _build(event, tiers[event["id"]])
    return layouts


def _remember(layouts: dict[int, EventLayout | None], read_at: float) -> None:
    for event_id, layout in layouts.items():
        _layouts.put(event_id, layout, kept_at=read_at)


def event_layout(event_id: int, *, fresh: bool = False) -> EventLayout | None:
    return event_layouts([event_id], fresh=fresh)[event_id]


def event_layouts(
    event_ids: Collection[int], *, fresh: bool = False
) -> dict[int, EventLayout | None]:
    """Layouts of several events (a page of the staff catalogue): the ones this process read
    recently from the cache, all the others in one read."""
    read_at = time.monotonic()
    found: dict[int, EventLayout | None] = {}
    if not fresh:
        for event_id in event_ids:
            hit, layout = _layouts.fresh(event_id)
            if hit:
                found[event_id] = layout
    missing = [event_id for event_id in event_ids if event_id not in found]
    if missing:
        loaded = _load_many(missing)
        _remember(loaded, read_at)
        found.update(loaded)
    return found


def layout_with_tier(event_id: int, *tier_ids: int) -> EventLayout:
    """The event's layout, read again if it does not know these tiers yet (just added);
    TicketNotFound when the event or a tier does not exist."""
    layout = event_layout(event_id)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        layout = event_layout(event_id, fresh=True)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        raise TicketNotFound()
    return layout


@closes_old_connections
def _read_layout(event_id: int) -> EventLayout | None:
    return event_layout(event_id)


async def event_layout_async(event_id: int) -> EventLayout | None:
    """The event's layout from the event loop: the one this process read recently, else read
    in a thread; raises DatabaseError when it must be read and cannot."""
    _, layout = _layouts.fresh(event_id)
    if layout is None:
        layout = await sync_to_async(_read_layout)(event_id)
    return layout


# ---------------------------------------------------------------------- the line


# How long a process keeps an on-sale's measured pace: a poll a second per fan would
# otherwise read it from Redis on every poll.
THROUGHPUT_SECONDS = 1.0


class LineReads:
    """Every read of the line that the hot index answers when it can (module docstring)."""

    def __init__(self) -> None:
        self._paces: ProcessCache[int, Throughput | None] = ProcessCache(
            "measured paces", seconds=THROUGHPUT_SECONDS
        )

    # ------------------------------------------------------------------------ counts

    def counts(self, layout: EventLayout) -> LineCounts:
        """The line's counts: from the hot index when it is complete, else from the line's
        snapshot (at most ``WR_DEGRADED_SNAPSHOT_SECONDS`` old; line/snapshots.py)."""
        hot = self._complete_counts(layout)
        return hot if hot is not None else line_snapshot(layout).counts(layout)

    def counts_many(self, layouts: Sequence[EventLayout]) -> dict[int, LineCounts]:
        """Each line's counts, by event id: from the hot index where it is complete; the lines
        it cannot answer for are counted in PostgreSQL together, in one grouped query."""
        counts: dict[int, LineCounts] = {}
        for layout in layouts:
            hot = self._complete_counts(layout)
            if hot is not None:
                counts[layout.event_id] = hot
        missing = [layout for layout in layouts if layout.event_id not in counts]
        if missing:
            counted = waiting_counts([layout.event_id for layout in missing])
            for layout in missing:
                prequeue, by_tier = counted.get(layout.event_id, (0, {}))
                counts[layout.event_id] = LineCounts(
                    state=IndexState.MISSING,
                    prequeue=prequeue,
                    tiers=tuple(by_tier.get(tier.id, 0) for tier in layout.tiers),
                )
        return counts

    def _complete_counts(self, layout: EventLayout) -> LineCounts | None:
        _, counts = answered(line_index.line_counts, layout)
        return counts if counts is not None and counts.state is IndexState.READY else None

    # -------------------------------------------------------------------------- pace

    def throughput(self, layout: EventLayout) -> Throughput | None:
        """The pace measured by the admission runs, else what the settings alone say
        (rules/eta.py); kept ``THROUGHPUT_SECONDS`` per process."""
        hit, throughput = self._paces.fresh(layout.event_id)
        if hit:
            return throughput
        _, measured = answered(stats.read_throughput, layout.event_id)
        return self._remember_pace(layout, measured)

    async def throughput_async(self, layout: EventLayout) -> Throughput | None:
        hit, throughput = self._paces.fresh(layout.event_id)
        if hit:
            return throughput
        _, measured = await answered_async(stats.read_throughput_async, layout.event_id)
        return self._remember_pace(layout, measured)

    def _remember_pace(self, layout: EventLayout, measured: Throughput | None) -> Throughput | None:
        # Nothing written yet (or Redis away): what the settings alone say (rules/eta.py).
        return self._paces.put(
            layout.event_id, measured if measured is not None else layout.settings_pace
        )

    # ---------------------------------------------------------------- a fan's place

    def fans_below(self, layout: EventLayout, asks: Sequence[tuple[int, int]]) -> list[int] | None:
        """For each (tier id, order key) of ``asks``: how many waiting fans of that tier hold
        a lower key, over every lane, counted by the hot index in one round trip (one per
        node on a cluster); None when it cannot count them all (missing, being rebuilt,
        away). A random line quotes its newcomers by it (line/joining.py)."""
        if not asks:
            return []
        positions = {tier.id: index for index, tier in enumerate(layout.tiers)}
        pairs = [(positions[tier_id], key) for tier_id, key in asks]
        _, counted = answered(
            line_index.lanes_counts_below, layout, dict.fromkeys(range(layout.lanes), pairs)
        )
        if counted is None or any(c.state is not IndexState.READY for c in counted.values()):
            return None
        return [sum(c.below[i] for c in counted.values()) for i in range(len(asks))]

    def position(
        self, entry: QueueEntry, layout: EventLayout, snapshot: LineSnapshot
    ) -> SketchedPosition:
        """A waiting fan's position while the hot index cannot answer: counted in PostgreSQL
        while the line is short (``WR_DEGRADED_EXACT_LINE``; cheap, and exact), else placed
        from the line's snapshot in memory."""
        if snapshot.waiting <= settings.WR_DEGRADED_EXACT_LINE:
            return SketchedPosition(position=position_counted(entry, layout.tiers), exact=True)
        return snapshot.position(layout, tier_id=entry.tier_id, order_key=entry.order_key)

    # ------------------------------------------------------------------- heartbeats

    def unseen_among(
        self,
        event: Event,
        ids: Sequence[int],
        now: datetime,
        *,
        lanes: Mapping[int, int] | None = None,
    ) -> UnseenAmong:
        """Which of ``ids`` (the next to be let in; ``lanes``: each one's lane) were not seen
        in time: those away (unseen for the heartbeat window) are passed over, and those
        whose hold ran out too (``away_seconds`` more) expire, so an abandoned tab never
        takes a shop slot. Without Redis, or while the index is flagged stale (heartbeats it
        could not record among what it missed), everyone counts as seen."""
        if event.hot_index_dirty:
            return UnseenAmong()
        _, deadlines = answered(line_index.heartbeat_deadlines, event.pk, ids, lanes=lanes)
        away_from = now.timestamp()
        gone_from = away_from - event.away_seconds
        unseen = {i: d for i, d in (deadlines or {}).items() if d is not None and d < away_from}
        return UnseenAmong(
            away=frozenset(i for i, d in unseen.items() if d >= gone_from),
            gone=frozenset(i for i, d in unseen.items() if d < gone_from),
        )

    def unseen(self, event_id: int, now: datetime, *, limit: int) -> dict[int, list[int]]:
        """Tickets in line whose heartbeat deadline passed before ``now``, by lane, oldest
        first, at most ``limit`` per lane (the caller moves ``now`` back by the hold of away
        fans); none while the index is flagged stale (it missed heartbeats: expiry.py) or is
        being reloaded (a rebuild grants everyone a grace period), nor without Redis."""
        row = Event.objects.filter(pk=event_id).values_list("hot_index_dirty", "lanes").first()
        if row is None or row[0]:
            return {}
        lanes = row[1]
        _, states = answered(epoch.epoch_states, [event_id], lanes={event_id: lanes})
        if states is None or states[event_id] is not IndexState.READY:
            return {}
        found: dict[int, list[int]] = {}
        for lane in range(lanes):
            _, overdue = answered(
                line_index.overdue_members, event_id, now=now.timestamp(), limit=limit, lane=lane
            )
            if overdue:
                found[lane] = overdue
        return found

    # ------------------------------------------------------- what ticks and pages show

    def sketch(self, layout: EventLayout, *, ranks: Sequence[int]) -> LineSketch | None:
        """The line's checkpoints for a tick, while the index is whole; else None (pages
        keep their last figures, and poll)."""
        _, line = answered(line_index.sketch, layout, ranks=ranks)
        return line if line is not None and line.state is IndexState.READY else None

    def line_samples(self, event_id: int, minutes: Sequence[int]) -> list[int | None]:
        """The line's length at each of ``minutes``, as the ticks sampled it (None: unknown)."""
        _, found = answered(stats.line_samples, event_id, minutes)
        return found if found is not None else [None] * len(minutes)

    async def last_tick_async(self, event_id: int) -> str | None:
        """The last tick broadcast for the on-sale (JSON), for a page's first snapshot."""
        _, tick = await answered_async(stats.last_tick_async, event_id)
        return tick


line_reads = LineReads()


@dataclass(frozen=True)
class UnseenAmong:
    """Of the fans admission is about to let in, those whose page was not seen in time."""

    away: frozenset[int] = frozenset()  # within their hold: passed over, place kept
    gone: frozenset[int] = frozenset()  # past their hold: expired


@dataclass(frozen=True)
class EventPublicView:
    state: EventState
    queue_length: int
    active: int
    eta_new: Eta | None


def event_public_view(event: Event, *, now: datetime) -> EventPublicView:
    """What anyone may see of an on-sale: its state, its line, the fans inside, and the wait
    a newcomer without a code would be quoted."""
    layout = event_layout(event.id)
    counts = line_reads.counts(layout) if layout else None
    eta_new = None
    state = event.state_at(now)
    if state != EventState.PAUSED and layout is not None and counts is not None and layout.tiers:
        defaults = default_tier_ids(event.id)
        default = next((t for t in layout.tiers if t.id in defaults), None)
        if default is not None:
            index = layout.tier_index(default.id) or 0
            position = position_in_line(
                layout,
                tier_id=default.id,
                rank_in_tier=counts.tiers[index] if index < len(counts.tiers) else 0,
                tier_counts=counts.tiers,
            )
            eta_new = estimate_wait(position, line_reads.throughput(layout), default.id)
    return EventPublicView(
        state=state,
        queue_length=counts.queue_length if counts else 0,
        active=active_counts([event.id])[event.id],
        eta_new=eta_new,
    )
