"""Where a fan stands in the whole line, from per-tier counts. Pure: no I/O."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

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


def rank_from_checkpoints(checkpoints: Sequence[tuple[int, int]], order_key: int) -> int | None:
    """The 0-based rank of ``order_key`` in a tier sketched by ascending ``(rank, order key)``
    checkpoints (a tick's, or a snapshot's): exact on a checkpoint, interpolated between two,
    None where the sketch cannot place it (before the first, past the last, or between two
    neighbouring ranks: not in this tier's line as sketched). The waiting page's rule
    (``rankIn`` in waiting.js), pinned to this one by tests/queueing/test_position_rule_js.py.
    """
    return _placed(checkpoints, order_key)[0]


def _placed(checkpoints: Sequence[tuple[int, int]], order_key: int) -> tuple[int | None, int]:
    """``rank_from_checkpoints``, and the index of the last checkpoint at or below the key
    (-1: none)."""
    lo = bisect.bisect_right(checkpoints, order_key, key=lambda c: c[1]) - 1
    if lo < 0:
        return None, lo
    rank_lo, key_lo = checkpoints[lo]
    if key_lo == order_key:
        return rank_lo, lo
    if lo == len(checkpoints) - 1:
        return None, lo
    rank_hi, key_hi = checkpoints[lo + 1]
    if rank_hi - rank_lo == 1:
        return None, lo
    # Rounded as Math.round does: halves up.
    fraction = (order_key - key_lo) / (key_hi - key_lo)
    guess = math.floor(rank_lo + fraction * (rank_hi - rank_lo) + 0.5)
    return min(rank_hi - 1, max(rank_lo + 1, guess)), lo


@dataclass(frozen=True)
class SketchedPosition:
    position: int
    exact: bool  # the fan's order key is a checkpoint's: its rank was counted, not guessed


def position_from_sketch(
    layout: EventLayout,
    *,
    tier_id: int,
    order_key: int,
    checkpoints: Sequence[tuple[int, int]],
    tier_counts: Sequence[int],
) -> SketchedPosition:
    """A waiting fan's position placed from a sketch of the line (its tier's checkpoints,
    every tier's count), as the waiting page places itself from a tick.

    Where the sketch cannot place the fan, the nearest rank it allows is taken: just after
    the checkpoint below its order key (behind everyone sketched, for a fan who joined after
    the sketch was taken), or first when there is none."""
    rank, below = _placed(checkpoints, order_key)
    exact = rank is not None and checkpoints[below][1] == order_key
    if rank is None:
        # Past the last checkpoint (the tier's last fan), that rank + 1 is the tier's count.
        rank = 0 if below < 0 else checkpoints[below][0] + 1
    position = position_in_line(layout, tier_id=tier_id, rank_in_tier=rank, tier_counts=tier_counts)
    return SketchedPosition(position=position, exact=exact)
