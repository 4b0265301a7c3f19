"""What a web process reads of a tick, once for all its pages (queueing/live/fanout.py): what
the line is doing, each tier's count and checkpoints, how fast it moves; and where a page stands
in it, as the rules place a fan from a sketch (queueing/rules/layout.py), without asking Redis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from queueing.rules.layout import EventLayout, position_in_line, rank_from_checkpoints
from queueing.rules.tick_bands import far_back_from, tick_spacing


@dataclass(frozen=True)
class TickTier:
    count: int
    checkpoints: list[tuple[int, int]]


@dataclass(frozen=True)
class TickView:
    """What the fan-out reads of a tick, parsed once per process: what the line is doing (a
    change goes to every page), each tier's count and checkpoints, and how fast it moves."""

    doing: tuple[Any, ...]
    tiers: dict[int, TickTier]
    fans_per_second: float | None
    # Per layout, tier and position: the first rank placed behind that position (see
    # ``spacing``), found once per tick rather than once per page.
    _ranks_behind: dict[tuple[int, int, int], int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> TickView | None:
        """None for a text that is not a tick the room sends (it goes to every page)."""
        try:
            tick = json.loads(text)
            throughput = tick.get("throughput") or {}
            lam = throughput.get("lam")
            return cls(
                doing=(
                    tick.get("state"),
                    tick.get("mode"),
                    tick.get("message"),
                    tick.get("sold_out_at"),
                    json.dumps(tick.get("limits"), sort_keys=True),
                ),
                tiers={
                    int(tier["id"]): TickTier(
                        count=int(tier["count"]),
                        checkpoints=[(int(r), int(k)) for r, k in tier["checkpoints"]],
                    )
                    for tier in tick["tiers"]
                },
                fans_per_second=float(lam) if lam and not throughput.get("ranged") else None,
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def spacing(self, place: Place, *, front: int, overloaded: bool) -> float:
        """How long the page at ``place`` may go without a tick (rules/tick_bands.py), its
        position placed from this tick as the rules place it; every tick where the tick cannot
        place it (the page asks the server then)."""
        tier = self.tiers.get(place.tier_id)
        rank = None if tier is None else rank_from_checkpoints(tier.checkpoints, place.order_key)
        if rank is None:
            return tick_spacing(None, front=front, fans_per_second=self.fans_per_second)
        # Most pages are far back, where the spacing no longer depends on the position:
        # positions grow with the rank, so one comparison places them.
        far = far_back_from(
            front=front, fans_per_second=self.fans_per_second, overloaded=overloaded
        )
        if rank >= self._rank_behind(place.layout, place.tier_id, far):
            position: int | None = far + 1
        else:
            position = self._position(place.layout, place.tier_id, rank)
        return tick_spacing(
            position, front=front, fans_per_second=self.fans_per_second, overloaded=overloaded
        )

    def _position(self, layout: EventLayout, tier_id: int, rank: int) -> int:
        counts = [self.tiers[t.id].count if t.id in self.tiers else 0 for t in layout.tiers]
        return position_in_line(layout, tier_id=tier_id, rank_in_tier=rank, tier_counts=counts)

    def _rank_behind(self, layout: EventLayout, tier_id: int, position: int) -> int:
        """The first rank of the tier whose position is past ``position`` (its count if none)."""
        memo = (id(layout), tier_id, position)
        if memo not in self._ranks_behind:
            lo, hi = 0, self.tiers[tier_id].count
            while lo < hi:
                mid = (lo + hi) // 2
                if self._position(layout, tier_id, mid) > position:
                    hi = mid
                else:
                    lo = mid + 1
            self._ranks_behind[memo] = lo
        return self._ranks_behind[memo]


@dataclass(frozen=True)
class Place:
    """Where a waiting page stands: its order key in its tier, and the on-sale's tiers."""

    layout: EventLayout
    tier_id: int
    order_key: int
