"""Each event's line in Redis: its tier queues and pre-queue (sorted sets by order key), found,
counted, sketched and trimmed in one round trip each; and its fans' heartbeat deadlines.
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


def tier_keys(layout: EventLayout) -> list[str]:
    return [keys.tier_queue(layout.event_id, tier.id) for tier in layout.tiers]


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


def _locate_keys(layout: EventLayout, tier_id: int) -> list[str]:
    event_id = layout.event_id
    return [
        keys.epoch(event_id),
        keys.heartbeats(event_id),
        keys.prequeue(event_id),
        keys.tier_queue(event_id, tier_id),
        keys.holders(event_id),
        *tier_keys(layout),
    ]


def _locate_args(request: LocateRequest) -> list[object]:
    deadline = request.heartbeat_deadline
    return [
        request.member,
        "" if deadline is None else repr(deadline),
        request.add or "",
        "" if request.order_key is None else request.order_key,
        request.holder,
    ]


def _placement(raw: Sequence[Any]) -> Placement:
    state, where, rank, score, elsewhere, *raw_counts = raw
    return Placement(
        counts=_line_counts(state, raw_counts),
        where=Where(where),
        rank=int(rank) if where == Where.TIER else None,
        order_key=int(float(score)) if score else None,
        held_elsewhere=bool(elsewhere),
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
) -> Placement:
    """Find an entry in its tier queue or the pre-queue, refresh its heartbeat if found,
    optionally add it first, and count the whole line, in one round trip."""
    (placement,) = locate_many(
        layout,
        [
            LocateRequest(
                member, tier_id, heartbeat_deadline, add=add, order_key=order_key, holder=holder
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
            "locate", keys=_locate_keys(layout, request.tier_id), args=_locate_args(request)
        )
        return [_placement(raw)]
    results = run_script_many(
        "locate", [(_locate_keys(layout, r.tier_id), _locate_args(r)) for r in requests]
    )
    return [_placement(raw) for raw in results]


async def locate_async(layout: EventLayout, request: LocateRequest) -> Placement:
    """``locate`` for the event loop (the lean status path in queueing/web/hot_paths.py)."""
    raw = await run_script_async(
        "locate", keys=_locate_keys(layout, request.tier_id), args=_locate_args(request)
    )
    return _placement(raw)


@unavailable_on_redis_error
def line_counts(layout: EventLayout) -> LineCounts:
    pipe = client().pipeline(transaction=False)
    pipe.get(keys.epoch(layout.event_id))
    pipe.zcard(keys.prequeue(layout.event_id))
    for key in tier_keys(layout):
        pipe.zcard(key)
    epoch, *raw_counts = pipe.execute()
    if epoch is None:
        return LineCounts(state=IndexState.MISSING, prequeue=0, tiers=())
    state = IndexState.BUILDING if epoch.startswith(b"building:") else IndexState.READY
    return _line_counts(state, raw_counts)


@unavailable_on_redis_error
def remove(event_id: int, *, tier_id: int, members: Sequence[int]) -> None:
    if not members:
        return
    run_script(
        "remove",
        keys=[
            keys.epoch(event_id),
            keys.tombstones(event_id),
            keys.heartbeats(event_id),
            keys.prequeue(event_id),
            keys.tier_queue(event_id, tier_id),
            keys.holders(event_id),
        ],
        args=list(members),
    )


@unavailable_on_redis_error
def holders_set(event_id: int, holders: Mapping[int, str]) -> None:
    """Which holder key each of these places in line shows at (they were moved to another
    browser): locate.lua leaves tickets naming another holder to the entry's row."""
    if holders:
        client().hset(keys.holders(event_id), mapping={str(m): h for m, h in holders.items()})


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


@unavailable_on_redis_error
def sketch(layout: EventLayout, *, ranks: Sequence[int]) -> LineSketch:
    raw = run_script(
        "sketch",
        keys=[keys.epoch(layout.event_id), keys.prequeue(layout.event_id), *tier_keys(layout)],
        args=list(ranks),
    )
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
    """The first ``count`` entries of every tier queue (where admission works)."""
    pipe = client().pipeline(transaction=False)
    for key in tier_keys(layout):
        pipe.zrange(key, 0, count - 1)
    return [int(member) for members in pipe.execute() for member in members]


# ------------------------------------------------------------------ heartbeat deadlines
# A sorted set per event, scored by the unix time after which each entry expires.


@unavailable_on_redis_error
def refresh_heartbeats(event_id: int, members: Sequence[int], *, deadline: float) -> None:
    """Push the deadline of fans watching over a WebSocket; XX: never revive an expired one.

    Each gets a deadline of its own, a microsecond after the one before (a hundred thousand
    tickets: a tenth of a second later): a sorted set compares the names of members whose
    scores tie, and one deadline for all of a process's tickets cost Redis about three times
    as much per ticket on a line of 1,000,000 (docs/benchmarks-notes.md, far-back pages)."""
    if members:
        spread = {member: deadline + i * 1e-6 for i, member in enumerate(members)}
        client().zadd(keys.heartbeats(event_id), spread, xx=True)


@unavailable_on_redis_error
def heartbeat_deadlines(event_id: int, members: Sequence[int]) -> dict[int, float | None]:
    """Each entry's heartbeat deadline (unix seconds), None where the index has none."""
    if not members:
        return {}
    scores = client().zmscore(keys.heartbeats(event_id), list(members))
    return {m: (None if s is None else float(s)) for m, s in zip(members, scores, strict=True)}


@unavailable_on_redis_error
def overdue_members(event_id: int, *, now: float, limit: int) -> list[int]:
    """Entries whose heartbeat deadline has passed, oldest first."""
    raw = client().zrangebyscore(keys.heartbeats(event_id), "-inf", f"({now}", start=0, num=limit)
    return [int(member) for member in raw]


@unavailable_on_redis_error
def forget_heartbeats(event_id: int, members: Sequence[int]) -> None:
    if members:
        client().zrem(keys.heartbeats(event_id), *members)
