"""What a fan who just joined a line of several lanes was counted behind in the other lanes:
their **join view** (queueing/line/lanes.py uses it while it is newer than the summary).

The summary is read once a second; a fan who joins after it is behind every fan of the other
lanes who joined since, which it does not hold (at 100,000 joins a second, far more than 1 %
of a short line). So a join batch, once in the index, counts each of its fans in every
other lane (one script per lane, one round trip), and keeps that view in the fan's lane
for a few seconds, with the fan's tier's admission counts as that lane holds them then (read
after the other lanes, as the summary reads its lanes before the counts). A poll reads it with
the rest of the fan's lane: the fan's place is then exact as of their join, less those let in
since.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence

from django.conf import settings

from queueing.hot import line_index
from queueing.hot.client import answered
from queueing.hot.line_index import IndexState
from queueing.rules.lanes import LaneSummary, LaneTier, checkpoints_counting
from queueing.rules.layout import EventLayout


def _view_seconds() -> int:
    """Until every process's summary is newer than the join: the tick's second, a process's
    cache of it, and the time after which a process reads the lanes itself."""
    return math.ceil(
        1 + settings.WR_LANES_SUMMARY_SECONDS + settings.WR_LANES_SUMMARY_STALE_SECONDS
    )


def join_views(layout: EventLayout, joined: Sequence[tuple[int, int, int, int]]) -> dict[int, str]:
    """Count fans who just joined (member, lane, tier id, order key; waiting, in their lane's
    index) in every other lane, and keep each fan's view in their lane: member -> the view
    as a poll reads it. Empty in a line of one lane, and where Redis could not give a whole
    one (the fan is then counted from the summary)."""
    if layout.lanes <= 1 or not joined:
        return {}
    positions = {tier.id: index for index, tier in enumerate(layout.tiers)}
    asks = {
        other: [(positions[tier_id], key) for _, lane, tier_id, key in joined if lane != other]
        for other in range(layout.lanes)
    }
    asks = {other: pairs for other, pairs in asks.items() if pairs}
    _, counted = answered(line_index.lanes_counts_below, layout, asks)
    if counted is None or any(c.state is not IndexState.READY for c in counted.values()):
        return {}
    at = time.time()
    cursor = dict.fromkeys(asks, 0)
    by_lane: dict[int, dict[int, tuple[int, str]]] = {}
    for member, lane, tier_id, _ in joined:
        others = []
        for other in sorted(asks):
            if other == lane:
                continue
            lane_counts = counted[other]
            others.append(
                [
                    other,
                    lane_counts.prequeue,
                    list(lane_counts.tiers),
                    lane_counts.below[cursor[other]],
                ]
            )
            cursor[other] += 1
        by_lane.setdefault(lane, {})[member] = (
            tier_id,
            json.dumps({"at": at, "lanes": others}, separators=(",", ":")),
        )
    views: dict[int, str] = {}
    for lane, lane_views in by_lane.items():
        _, let_in = answered(
            line_index.join_views_write,
            layout.event_id,
            lane,
            lane_views,
            ttl_seconds=_view_seconds(),
        )
        for member, (total, here) in (let_in or {}).items():
            views[member] = f"{lane_views[member][1]}|{total}|{here}"
    return views


def view_summaries(
    raw: str, layout: EventLayout, *, lane: int, tier_id: int, order_key: int | None
) -> tuple[float, tuple[LaneSummary, ...]] | None:
    """A fan's join view as the summaries ``across_lanes`` reads, with the time it was
    counted; None if it is not one (or the line's lanes changed since)."""
    try:
        payload, total, here = raw.rsplit("|", 2)
        data = json.loads(payload)
        tier_ids = [tier.id for tier in layout.tiers]
        summaries = [
            LaneSummary(
                lane=lane,
                prequeue=0,
                tiers={},
                let_in_total={tier_id: int(total)},
                let_in_here={tier_id: int(here)},
            )
        ]
        for other, prequeue, counts, below in data["lanes"]:
            # A tier added since the join has none of this lane's fans in the view.
            counted = zip(tier_ids, counts, strict=False)
            tiers = {tid: LaneTier(int(count), ()) for tid, count in counted}
            if order_key is not None and tier_id in tiers:
                tiers[tier_id] = LaneTier(
                    tiers[tier_id].count, checkpoints_counting(int(below), order_key)
                )
            summaries.append(LaneSummary(lane=int(other), prequeue=int(prequeue), tiers=tiers))
        at = float(data["at"])
    except (ValueError, TypeError, KeyError):
        return None
    if sorted(s.lane for s in summaries) != list(range(layout.lanes)):
        return None
    return at, tuple(summaries)
