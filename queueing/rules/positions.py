"""Where a fan stands in the whole line, from per-tier counts. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from queueing.rules.admission_plan import service_groups
from queueing.rules.layout import EventLayout


def position_in_line(
    layout: EventLayout, *, tier_id: int, rank_in_tier: int, tier_counts: Sequence[int]
) -> int:
    """1-based position ("1" = next) of a waiting fan, following admission's service order.

    Everyone in the groups served before the fan's is ahead. In a strict tier, those ahead in
    the tier are. In a weighted group, for every fan ahead in the fan's own tier (weight w),
    another tier of weight v sends about v / w fans first.
    """
    counts = dict(zip((tier.id for tier in layout.tiers), tier_counts, strict=False))
    ahead = 0
    for group in service_groups(layout.tiers):
        mine = next((tier for tier in group if tier.id == tier_id), None)
        if mine is None:
            ahead += sum(counts.get(tier.id, 0) for tier in group)
            continue
        ahead += rank_in_tier
        for other in group:
            if other.id != tier_id:
                ahead += min(counts.get(other.id, 0), rank_in_tier * other.share // mine.share)
        break
    return ahead + 1
