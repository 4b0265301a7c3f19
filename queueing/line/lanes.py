"""The whole line of an on-sale split in lanes (queueing/rules/lanes.py), as one fan sees it.

A poll asks one script of the fan's own lane (their exact rank there, their lane's counts);
the other lanes are added from a **summary** of every lane (per tier: its count and
``(rank, order key)`` checkpoints, exact at each lane's front, at most 1 % of the rank apart
behind). The tick reads it from every lane once a second (one script per lane, in one round
trip) and keeps it under lane 0's tag (``lanes_summary_publish``); each process reads it at
most once a second (``lanes_summary``), and reads the lanes itself, once, should the tick's
be missing or older than ``WR_LANES_SUMMARY_STALE_SECONDS``. So a poll costs one lane's
master, whatever the number of lanes. Where a count was read between two checkpoints the answer says
``approximate``; it is off by less than 1 % of the position (plus what moved in the second
since the summary was read).

A line of one lane is not touched: its poll counts the whole line, exactly, as it always did.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import replace

from django.conf import settings

from queueing.hot import line_index
from queueing.hot.client import answered
from queueing.hot.line_index import (
    IndexState,
    LineCounts,
    LineSketch,
    Placement,
    TierSketch,
    Where,
)
from queueing.in_process import ProcessCache
from queueing.line.join_views import view_summaries
from queueing.rules.lanes import (
    LaneSummary,
    LaneTier,
    across_lanes,
    merged_checkpoints,
    summary_ranks,
)
from queueing.rules.layout import EventLayout

SUMMARY_RANKS = summary_ranks()

# Kept WR_LANES_SUMMARY_SECONDS per process; a tick's older than
# WR_LANES_SUMMARY_STALE_SECONDS (the tick is not running) is read again from the lanes.
_summaries: ProcessCache[int, tuple[float, tuple[LaneSummary, ...]] | None] = ProcessCache(
    "lanes summaries", seconds=lambda: settings.WR_LANES_SUMMARY_SECONDS
)


def _counted(counts: dict[str, int], kind: str) -> dict[int, int]:
    prefix = f"{kind}:"
    return {int(k[len(prefix) :]): v for k, v in counts.items() if k.startswith(prefix)}


def _from_sketches(
    sketches: Sequence[LineSketch], let_in: Sequence[dict[str, int]]
) -> tuple[LaneSummary, ...] | None:
    if any(sketch.state is not IndexState.READY for sketch in sketches):
        return None  # a lane not whole: the line's figures come from PostgreSQL meanwhile
    return tuple(
        LaneSummary(
            lane=lane,
            prequeue=sketch.prequeue,
            tiers={t.tier_id: LaneTier(t.count, t.checkpoints) for t in sketch.tiers},
            let_in_total=_counted(counts, "total"),
            let_in_here=_counted(counts, "here"),
        )
        for lane, (sketch, counts) in enumerate(zip(sketches, let_in, strict=True))
    )


def _encoded(at: float, summaries: Sequence[LaneSummary]) -> str:
    return json.dumps(
        {
            "at": at,
            "lanes": [
                {
                    "prequeue": s.prequeue,
                    "let_in": [
                        {str(k): v for k, v in s.let_in_total.items()},
                        {str(k): v for k, v in s.let_in_here.items()},
                    ],
                    "tiers": {
                        str(tier_id): [t.count, [v for point in t.checkpoints for v in point]]
                        for tier_id, t in s.tiers.items()
                    },
                }
                for s in summaries
            ],
        },
        separators=(",", ":"),
    )


def _decoded(raw: bytes) -> tuple[float, tuple[LaneSummary, ...]]:
    data = json.loads(raw)
    return float(data["at"]), tuple(
        LaneSummary(
            lane=lane,
            prequeue=int(s["prequeue"]),
            let_in_total={int(k): int(v) for k, v in s["let_in"][0].items()},
            let_in_here={int(k): int(v) for k, v in s["let_in"][1].items()},
            tiers={
                int(tier_id): LaneTier(int(count), tuple(zip(flat[0::2], flat[1::2], strict=True)))
                for tier_id, (count, flat) in s["tiers"].items()
            },
        )
        for lane, s in enumerate(data["lanes"])
    )


def _read_lanes(layout: EventLayout) -> tuple[LaneSummary, ...] | None:
    """Every lane's sketch, then its admission counts (admission counts after it took its
    fans out of the index: read in this order, a summary taken between the two holds those
    fans in both, so they are at worst counted ahead until the next one)."""
    _, sketches = answered(line_index.lane_sketches, layout, ranks=SUMMARY_RANKS)
    if sketches is None:
        return None
    _, let_in = answered(line_index.admitted_counts_read, layout.event_id, lanes=layout.lanes)
    return _from_sketches(sketches, let_in) if let_in is not None else None


def lanes_summary(layout: EventLayout) -> tuple[LaneSummary, ...] | None:
    """Every lane's summary: the tick's, kept ``WR_LANES_SUMMARY_SECONDS`` per process; read
    from the lanes when the tick's is missing or stale; None while Redis cannot give a whole
    one."""
    found = _lanes_summary_read(layout)
    return found[1] if found is not None else None


def _lanes_summary_read(layout: EventLayout) -> tuple[float, tuple[LaneSummary, ...]] | None:
    """``lanes_summary`` with the time it was read from the lanes."""
    hit, kept = _summaries.fresh(layout.event_id)
    if hit:
        return kept
    now = time.time()
    _, raw = answered(line_index.lanes_summary_read, layout.event_id)
    found: tuple[float, tuple[LaneSummary, ...]] | None = None
    if raw is not None:
        at, summaries = _decoded(raw)
        fresh = now - at <= settings.WR_LANES_SUMMARY_STALE_SECONDS
        if fresh and len(summaries) == layout.lanes:
            found = (at, summaries)
    if found is None:
        read = _read_lanes(layout)
        found = (now, read) if read is not None else None
    _summaries.put(layout.event_id, found)
    return found


def lanes_summary_publish(layout: EventLayout, *, ttl_seconds: int) -> LineSketch | None:
    """The tick's part: every lane read (one script each, one round trip), the summary kept
    for every process, and the whole line's sketch for the pages (each tier's checkpoints
    placed across the lanes at ``ranks``). None while a lane is not whole."""
    summaries = _read_lanes(layout)
    if summaries is None:
        return None
    now = time.time()
    answered(
        line_index.lanes_summary_write,
        layout.event_id,
        _encoded(now, summaries),
        ttl_seconds=ttl_seconds,
    )
    _summaries.put(layout.event_id, (now, summaries))
    return LineSketch(
        state=IndexState.READY,
        prequeue=sum(s.prequeue for s in summaries),
        tiers=tuple(_merged_tier(tier.id, summaries) for tier in layout.tiers),
    )


# What a tick's pages get: every rank at the front, then about 15 % apart (live/ticks.py).
_TICK_FRONT = 32
_TICK_GROWTH = 1.15


def _tick_ranks() -> list[int]:
    ranks = list(range(_TICK_FRONT))
    rank = float(_TICK_FRONT)
    while rank < 10**9:
        ranks.append(int(rank))
        rank = max(rank * _TICK_GROWTH, rank + 1)
    return ranks


_TICK_RANKS = _tick_ranks()


def _merged_tier(tier_id: int, summaries: Sequence[LaneSummary]) -> TierSketch:
    count, points = merged_checkpoints(tier_id, summaries, ranks=_TICK_RANKS)
    return TierSketch(tier_id=tier_id, count=count, checkpoints=points)


def placement_in_line(
    layout: EventLayout, placement: Placement, *, lane: int, tier_id: int
) -> Placement:
    """A placement found in the fan's own lane, made the whole line's: the other lanes'
    counts added, and their fans ahead of this one in its tier. A line of one lane is as
    found. Without a whole summary, the placement says the index cannot answer
    (``BUILDING``), and the answer comes from PostgreSQL's snapshot of the whole line.

    A fan who joined after the summary was read is counted from their join view instead
    (line/join_views.py): the summary holds none of the other lanes' fans who joined just before
    them, and during a burst of joins those are many."""
    if layout.lanes <= 1 or placement.counts.state is not IndexState.READY:
        return placement
    found = _lanes_summary_read(layout)
    view = None
    if placement.view is not None:
        view = view_summaries(
            placement.view,
            layout,
            lane=lane,
            tier_id=tier_id,
            order_key=placement.order_key if placement.where is Where.TIER else None,
        )
    if view is not None and (found is None or view[0] > found[0]):
        found = view
    if found is None:
        return replace(placement, counts=replace(placement.counts, state=IndexState.BUILDING))
    summaries = found[1]
    tier_ids = [tier.id for tier in layout.tiers]
    in_tier = placement.where is Where.TIER
    whole = across_lanes(
        tier_ids,
        lane=lane,
        tier_id=tier_id,
        rank_in_lane=placement.rank if in_tier else None,
        order_key=placement.order_key if in_tier else None,
        own_prequeue=placement.counts.prequeue,
        own_counts=placement.counts.tiers,
        summaries=summaries,
        let_in=placement.let_in,
    )
    return replace(
        placement,
        counts=LineCounts(state=IndexState.READY, prequeue=whole.prequeue, tiers=whole.tier_counts),
        rank=whole.rank_in_tier,
        approximate=not whole.exact,
    )


async def placement_in_line_async(
    layout: EventLayout, placement: Placement, *, lane: int, tier_id: int
) -> Placement:
    """``placement_in_line`` from the event loop: in it while this process's summary is
    fresh (nearly every poll), in a thread when it must be read."""
    if layout.lanes <= 1 or placement.counts.state is not IndexState.READY:
        return placement
    hit, _ = _summaries.fresh(layout.event_id)
    if hit:
        return placement_in_line(layout, placement, lane=lane, tier_id=tier_id)
    return await asyncio.to_thread(placement_in_line, layout, placement, lane=lane, tier_id=tier_id)
