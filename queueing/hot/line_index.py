"""Each event's line in Redis: its tier queues and pre-queue (sorted sets by order key), found,
counted, sketched and trimmed in one round trip each; and its fans' heartbeat deadlines.

A line of several lanes (queueing/rules/lanes.py) has these keys once per lane, each lane
under its own hash tag (queueing/hot/keys.py): every script touches one lane's keys. A fan
is found in their own lane (``lane`` of the request); what spans the lanes (the whole
line's counts, the heads of the tiers) is read with one pipeline, which a cluster client
splits per node.

Over 350 lines on purpose: every read and write of a line's sorted sets, one lane's or all
of them, and the lanes' summary the tick keeps, in one place beside the keys they share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

from queueing.hot import keys
from queueing.hot.client import (
    client,
    run_script,
    run_script_async,
    run_script_many,
    unavailable_on_redis_error,
)
from queueing.rules.layout import EventLayout


class IndexState(IntEnum):
    MISSING = 0
    BUILDING = 1
    READY = 2


@dataclass(frozen=True)
class LineCounts:
    state: IndexState
    prequeue: int
    tiers: tuple[int, ...]  # waiting fans per tier, in layout order

    @property
    def waiting(self) -> int:
        return sum(self.tiers)

    @property
    def queue_length(self) -> int:
        return self.prequeue + self.waiting


class Where(IntEnum):
    NOWHERE = 0
    TIER = 1
    PREQUEUE = 2


@dataclass(frozen=True)
class Placement:
    counts: LineCounts
    where: Where
    rank: int | None  # 0-based rank in the entry's tier queue when where is TIER
    order_key: int | None  # the entry's score where found
    # The place was moved to another browser than the one the asking ticket names: not to
    # be answered from the index (the entry's row refuses the ticket).
    held_elsewhere: bool = False
    # The rank and counts include other lanes' read between two checkpoints of their
    # summary (queueing/line/lanes.py): near, not exact.
    approximate: bool = False
    # Fans let in from the entry's tier so far: (from the whole line, from the entry's lane),
    # as admission counted them in the entry's lane (lines of several lanes: ``admitted_count``).
    let_in: tuple[int, int] = (0, 0)
    # What the fan was counted behind in the other lanes when they joined, while it is kept
    # (``keys.join_view``; read and used by queueing/line/lanes.py).
    view: str | None = None


def tier_keys(layout: EventLayout, lane: int = 0) -> list[str]:
    return [keys.tier_queue(layout.event_id, tier.id, lane) for tier in layout.tiers]


def _line_counts(state: int, raw_counts: Sequence[int]) -> LineCounts:
    if not raw_counts:
        return LineCounts(state=IndexState(state), prequeue=0, tiers=())
    return LineCounts(
        state=IndexState(state),
        prequeue=int(raw_counts[0]),
        tiers=tuple(int(c) for c in raw_counts[1:]),
    )


@dataclass(frozen=True)
class LocateRequest:
    """One entry to find (and refresh, optionally add) in an event's index."""

    member: int
    tier_id: int
    heartbeat_deadline: float | None
    add: Literal["tier", "pre"] | None = None
    order_key: int | None = None
    holder: str = ""  # the holder key the asking ticket names ("": a place never moved)
    lane: int = 0  # the entry's lane: where its keys are


def _locate_keys(layout: EventLayout, request: LocateRequest) -> list[str]:
    event_id, lane = layout.event_id, request.lane
    return [
        keys.epoch(event_id, lane),
        keys.heartbeats(event_id, lane),
        keys.prequeue(event_id, lane),
        keys.tier_queue(event_id, request.tier_id, lane),
        keys.holders(event_id, lane),
        keys.admitted_counts(event_id, lane),
        *([keys.join_view(event_id, request.member, lane)] if layout.lanes > 1 else []),
        *tier_keys(layout, lane),
    ]


def _locate_args(request: LocateRequest, *, lanes: int) -> list[object]:
    deadline = request.heartbeat_deadline
    return [
        request.member,
        "" if deadline is None else repr(deadline),
        request.add or "",
        "" if request.order_key is None else request.order_key,
        request.holder,
        # The admission counts matter only beside other lanes (the hottest script: a line of
        # one lane reads nothing more than it always did).
        request.tier_id if lanes > 1 else "",
    ]


def _placement(raw: Sequence[Any]) -> Placement:
    state, where, rank, score, elsewhere, *rest = raw
    # A missing epoch answers before reading the counts.
    total, here, view, *_ = [*((rest[0] if rest else None) or ()), None, None, None]
    return Placement(
        counts=_line_counts(state, rest[1:]),
        where=Where(where),
        rank=int(rank) if where == Where.TIER else None,
        order_key=int(float(score)) if score else None,
        held_elsewhere=bool(elsewhere),
        let_in=(int(total or 0), int(here or 0)),
        view=(view.decode() if isinstance(view, bytes) else view) or None,
    )


@unavailable_on_redis_error
def locate(
    layout: EventLayout,
    *,
    member: int,
    tier_id: int,
    heartbeat_deadline: float | None,
    add: Literal["tier", "pre"] | None = None,
    order_key: int | None = None,
    holder: str = "",
    lane: int = 0,
) -> Placement:
    """Find an entry in its tier queue or the pre-queue, refresh its heartbeat if found,
    optionally add it first, and count its lane's line, in one round trip."""
    (placement,) = locate_many(
        layout,
        [
            LocateRequest(
                member,
                tier_id,
                heartbeat_deadline,
                add=add,
                order_key=order_key,
                holder=holder,
                lane=lane,
            )
        ],
    )
    return placement


@unavailable_on_redis_error
def locate_many(layout: EventLayout, requests: Sequence[LocateRequest]) -> list[Placement]:
    """``locate`` for several entries of one event in one round trip (a batch of joins)."""
    if len(requests) == 1:
        request = requests[0]
        raw = run_script(
            "locate",
            keys=_locate_keys(layout, request),
            args=_locate_args(request, lanes=layout.lanes),
        )
        return [_placement(raw)]
    results = run_script_many(
        "locate",
        [(_locate_keys(layout, r), _locate_args(r, lanes=layout.lanes)) for r in requests],
    )
    return [_placement(raw) for raw in results]


async def locate_async(layout: EventLayout, request: LocateRequest) -> Placement:
    """``locate`` for the event loop (the lean status path in queueing/web/hot_paths.py)."""
    raw = await run_script_async(
        "locate",
        keys=_locate_keys(layout, request),
        args=_locate_args(request, lanes=layout.lanes),
    )
    return _placement(raw)


@unavailable_on_redis_error
def line_counts(layout: EventLayout) -> LineCounts:
    """The whole line's counts, every lane's summed (one pipeline); the state is the worst
    lane's: the line is whole only when every lane is."""
    pipe = client().pipeline(transaction=False)
    for lane in range(layout.lanes):
        pipe.get(keys.epoch(layout.event_id, lane))
        pipe.zcard(keys.prequeue(layout.event_id, lane))
        for key in tier_keys(layout, lane):
            pipe.zcard(key)
    raw = pipe.execute()
    per_lane = len(layout.tiers) + 2
    state = IndexState.READY
    prequeue, tiers = 0, [0] * len(layout.tiers)
    for lane in range(layout.lanes):
        epoch, pre, *raw_counts = raw[lane * per_lane : (lane + 1) * per_lane]
        if epoch is None:
            return LineCounts(state=IndexState.MISSING, prequeue=0, tiers=())
        if epoch.startswith(b"building:"):
            state = IndexState.BUILDING
        prequeue += int(pre)
        tiers = [total + int(count) for total, count in zip(tiers, raw_counts, strict=True)]
    return LineCounts(state=state, prequeue=prequeue, tiers=tuple(tiers))


def _remove_keys(event_id: int, tier_id: int, lane: int) -> list[str]:
    return [
        keys.epoch(event_id, lane),
        keys.tombstones(event_id, lane),
        keys.heartbeats(event_id, lane),
        keys.prequeue(event_id, lane),
        keys.tier_queue(event_id, tier_id, lane),
        keys.holders(event_id, lane),
    ]


@unavailable_on_redis_error
def remove(event_id: int, *, tier_id: int, members: Sequence[int], lane: int = 0) -> None:
    if not members:
        return
    run_script("remove", keys=_remove_keys(event_id, tier_id, lane), args=list(members))


@unavailable_on_redis_error
def line_drop(event_id: int, *, tier_ids: Sequence[int], lanes: int) -> int:
    """Drop the event's whole line (every lane's tiers, pre-queue, heartbeats and moved places'
    holders) at once: everyone in it has left the line. One script per lane (each lane's keys
    share its hash tag), all in one round trip. The keys deleted."""
    calls: list[tuple[list[str], list[object]]] = [
        (
            [
                keys.epoch(event_id, lane),
                keys.heartbeats(event_id, lane),
                keys.prequeue(event_id, lane),
                keys.holders(event_id, lane),
                *(keys.tier_queue(event_id, tier_id, lane) for tier_id in tier_ids),
                # The lanes' summary the ticks keep (lane 0's tag): nobody is left to place.
                *([keys.lanes_summary(event_id)] if lane == 0 else []),
            ],
            [],
        )
        for lane in range(lanes)
    ]
    if len(calls) == 1:
        return int(run_script("line_drop", keys=calls[0][0], args=calls[0][1]))
    return sum(int(dropped) for dropped in run_script_many("line_drop", calls))


@unavailable_on_redis_error
def remove_many(event_id: int, members: Mapping[tuple[int, int], Sequence[int]]) -> None:
    """``remove`` for the entries of several (lane, tier) at once: one script per lane and
    tier, all in one round trip (on a cluster, one per node)."""
    calls = [
        (_remove_keys(event_id, tier_id, lane), list(ids))
        for (lane, tier_id), ids in members.items()
        if ids
    ]
    if len(calls) == 1:
        run_script("remove", keys=calls[0][0], args=calls[0][1])
    elif calls:
        run_script_many("remove", calls)


@unavailable_on_redis_error
def admitted_count(event_id: int, let_in: Mapping[tuple[int, int], int], *, lanes: int) -> None:
    """After an admission in a line of several lanes: the fans let in, by (lane, tier),
    counted in every lane (one script per lane, one round trip): each lane's copy holds the
    whole line's count per tier and its own. A poll reads its own lane's copy (locate.lua),
    and the lanes' summary the copies as they were, so that the other lanes' fans let in
    since the summary are not counted ahead of anyone."""
    totals: dict[int, int] = {}
    for (_, tier_id), count in let_in.items():
        totals[tier_id] = totals.get(tier_id, 0) + count
    calls = []
    for lane in range(lanes):
        args: list[object] = []
        for tier_id, count in totals.items():
            args += [f"total:{tier_id}", count]
        for (from_lane, tier_id), count in let_in.items():
            if from_lane == lane:
                args += [f"here:{tier_id}", count]
        calls.append(([keys.admitted_counts(event_id, lane)], args))
    if totals:
        run_script_many("admitted_count", calls)


@unavailable_on_redis_error
def admitted_counts_read(event_id: int, *, lanes: int) -> list[dict[str, int]]:
    """Every lane's copy of the admission counts, in lane order (one pipeline)."""
    pipe = client().pipeline(transaction=False)
    for lane in range(lanes):
        pipe.hgetall(keys.admitted_counts(event_id, lane))
    return [
        {(k.decode() if isinstance(k, bytes) else k): int(v) for k, v in found.items()}
        for found in pipe.execute()
    ]


@dataclass(frozen=True)
class LaneCounts:
    """One lane's counts, and how many of its fans are below each of the keys asked."""

    state: IndexState
    prequeue: int
    tiers: tuple[int, ...]  # in layout order
    below: tuple[int, ...]  # one per key asked, in the order asked


@unavailable_on_redis_error
def lanes_counts_below(
    layout: EventLayout, asks: Mapping[int, Sequence[tuple[int, int]]]
) -> dict[int, LaneCounts]:
    """For each lane of ``asks`` (lane -> (tier position in the layout, order key) pairs):
    its counts, and its fans below each key, in one round trip (on a cluster, one per
    node)."""
    lanes = sorted(asks)
    calls = [
        (
            [
                keys.epoch(layout.event_id, lane),
                keys.prequeue(layout.event_id, lane),
                *tier_keys(layout, lane),
            ],
            [v for position, key in asks[lane] for v in (position + 1, key)],
        )
        for lane in lanes
    ]
    found: dict[int, LaneCounts] = {}
    for lane, raw in zip(lanes, run_script_many("lane_counts", calls), strict=True):
        state, *rest = raw
        tiers = len(layout.tiers)
        found[lane] = LaneCounts(
            state=IndexState(state),
            prequeue=int(rest[0]) if rest else 0,
            tiers=tuple(int(c) for c in rest[1 : 1 + tiers]),
            below=tuple(int(c) for c in rest[1 + tiers :]),
        )
    return found


@unavailable_on_redis_error
def join_views_write(
    event_id: int, lane: int, views: Mapping[int, tuple[int, str]], *, ttl_seconds: int
) -> dict[int, tuple[int, int]]:
    """Keep each fan's join view (member -> (tier id, JSON)) in their lane, with their
    tier's admission counts as the lane holds them now; those counts, per member."""
    members = list(views)
    raw = run_script(
        "view_write",
        keys=[
            keys.admitted_counts(event_id, lane),
            *(keys.join_view(event_id, member, lane) for member in members),
        ],
        args=[ttl_seconds, *(v for member in members for v in views[member])],
    )
    return {member: (int(t), int(h)) for member, (t, h) in zip(members, raw, strict=True)}


@unavailable_on_redis_error
def holders_set(event_id: int, holders: Mapping[int, str], *, lane: int = 0) -> None:
    """Which holder key each of these places in line (of one lane) shows at (they were moved
    to another browser): locate.lua leaves tickets naming another holder to the entry's row."""
    if holders:
        client().hset(keys.holders(event_id, lane), mapping={str(m): h for m, h in holders.items()})


@dataclass(frozen=True)
class TierSketch:
    tier_id: int
    count: int
    # (rank, order key) checkpoints, ascending: from them a fan who knows its order key can
    # tell its rank in the tier to within the gap between two checkpoints.
    checkpoints: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LineSketch:
    state: IndexState
    prequeue: int
    tiers: tuple[TierSketch, ...]


def _sketch_keys(layout: EventLayout, lane: int) -> list[str]:
    event_id = layout.event_id
    return [keys.epoch(event_id, lane), keys.prequeue(event_id, lane), *tier_keys(layout, lane)]


@unavailable_on_redis_error
def sketch(layout: EventLayout, *, ranks: Sequence[int]) -> LineSketch:
    """The sketch of a line of one lane (lane 0)."""
    return _line_sketch(
        layout, run_script("sketch", keys=_sketch_keys(layout, 0), args=list(ranks))
    )


@unavailable_on_redis_error
def lane_sketches(layout: EventLayout, *, ranks: Sequence[int]) -> list[LineSketch]:
    """The sketch of each lane of the line, in lane order, in one round trip (on a cluster,
    one per node): each lane's script reads its own keys only."""
    raw = run_script_many(
        "sketch", [(_sketch_keys(layout, lane), list(ranks)) for lane in range(layout.lanes)]
    )
    return [_line_sketch(layout, lane_raw) for lane_raw in raw]


def _line_sketch(layout: EventLayout, raw: Sequence[Any]) -> LineSketch:
    state, prequeue, *per_tier = raw
    if state == IndexState.MISSING:
        return LineSketch(state=IndexState.MISSING, prequeue=0, tiers=())
    tiers = []
    for tier, (count, *flat) in zip(layout.tiers, per_tier, strict=True):
        pairs = tuple((int(flat[i]), int(float(flat[i + 1]))) for i in range(0, len(flat), 2))
        tiers.append(TierSketch(tier_id=tier.id, count=int(count), checkpoints=pairs))
    return LineSketch(state=IndexState(state), prequeue=int(prequeue), tiers=tuple(tiers))


@unavailable_on_redis_error
def head_members(layout: EventLayout, *, count: int) -> list[int]:
    """The first ``count`` entries of every tier queue of every lane (where admission
    works: it merges the lanes' heads)."""
    pipe = client().pipeline(transaction=False)
    for lane in range(layout.lanes):
        for key in tier_keys(layout, lane):
            pipe.zrange(key, 0, count - 1)
    return [int(member) for members in pipe.execute() for member in members]


# ------------------------------------------------------------------ heartbeat deadlines
# A sorted set per event, scored by the unix time after which each entry expires.


@unavailable_on_redis_error
def refresh_heartbeats(
    event_id: int, members: Sequence[int], *, deadline: float, lane: int = 0
) -> None:
    """Push the deadline of fans (of one lane) watching over a WebSocket; XX: never revive an
    expired one.

    Each gets a deadline of its own, a microsecond after the one before (a hundred thousand
    tickets: a tenth of a second later): a sorted set compares the names of members whose
    scores tie, and one deadline for all of a process's tickets cost Redis about three times
    as much per ticket on a line of 1,000,000 (docs/benchmarks-notes.md, far-back pages)."""
    if members:
        spread = {member: deadline + i * 1e-6 for i, member in enumerate(members)}
        client().zadd(keys.heartbeats(event_id, lane), spread, xx=True)


@unavailable_on_redis_error
def heartbeat_deadlines(
    event_id: int, members: Sequence[int], *, lanes: Mapping[int, int] | None = None
) -> dict[int, float | None]:
    """Each entry's heartbeat deadline (unix seconds), None where the index has none;
    ``lanes``: each entry's lane (missing: lane 0), one read per lane in one pipeline."""
    if not members:
        return {}
    by_lane: dict[int, list[int]] = {}
    for member in members:
        by_lane.setdefault(lanes.get(member, 0) if lanes else 0, []).append(member)
    pipe = client().pipeline(transaction=False)
    for lane, lane_members in by_lane.items():
        pipe.zmscore(keys.heartbeats(event_id, lane), lane_members)
    found: dict[int, float | None] = {}
    for lane_members, scores in zip(by_lane.values(), pipe.execute(), strict=True):
        for member, score in zip(lane_members, scores, strict=True):
            found[member] = None if score is None else float(score)
    return found


@unavailable_on_redis_error
def overdue_members(event_id: int, *, now: float, limit: int, lane: int = 0) -> list[int]:
    """The lane's entries whose heartbeat deadline has passed, oldest first."""
    raw = client().zrangebyscore(
        keys.heartbeats(event_id, lane), "-inf", f"({now}", start=0, num=limit
    )
    return [int(member) for member in raw]


@unavailable_on_redis_error
def forget_heartbeats(event_id: int, members: Sequence[int], *, lane: int = 0) -> None:
    if members:
        client().zrem(keys.heartbeats(event_id, lane), *members)


# ------------------------------------------------------------------- the lanes' summary
# Written by the tick (JSON, under lane 0's tag), read by every process at most once a
# second (queueing/line/lanes.py).


@unavailable_on_redis_error
def lanes_summary_write(event_id: int, text: str, *, ttl_seconds: int) -> None:
    client().set(keys.lanes_summary(event_id), text, ex=ttl_seconds)


@unavailable_on_redis_error
def lanes_summary_read(event_id: int) -> bytes | None:
    raw: bytes | None = client().get(keys.lanes_summary(event_id))
    return raw
