"""Where a fan stands in the whole line, from per-tier counts. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from queueing.layout import EventLayout


def position_in_line(
    layout: EventLayout, *, tier_id: int, rank_in_tier: int, tier_counts: Sequence[int]
) -> int:
    """1-based position ("1" = next) of a waiting fan.

    Tiers are served in (priority, id) order, so everyone waiting in a tier before the fan's
    own is ahead of the fan, plus those ahead within the fan's tier.
    """
    ahead = rank_in_tier
    for tier, count in zip(layout.tiers, tier_counts, strict=False):
        if tier.id == tier_id:
            break
        ahead += count
    return ahead + 1
