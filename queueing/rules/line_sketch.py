"""A line told in a few numbers: per tier, ``(rank, order key)`` checkpoints, every rank at
the front and about 15% apart behind. The live tick sends them to pages; without the hot index
the room keeps one such sketch per on-sale from PostgreSQL and places polls on it. Pure."""

from __future__ import annotations

from collections.abc import Sequence

EXACT_FRONT = 32
GROWTH = 1.15
MAX_RANK = 10**9


def checkpoint_ranks() -> list[int]:
    """Every rank at the front (where fans watch closely), then ~15% apart."""
    ranks = list(range(EXACT_FRONT))
    rank = float(EXACT_FRONT)
    while rank < MAX_RANK:
        ranks.append(int(rank))
        rank = max(rank * GROWTH, rank + 1)
    return ranks


CHECKPOINT_RANKS = checkpoint_ranks()


def rank_from_checkpoints(
    checkpoints: Sequence[tuple[int, int]], *, order_key: int, count: int
) -> int:
    """The rank (0 = first) of ``order_key`` in a tier of ``count`` sketched by
    ``checkpoints`` ((rank, order key), ascending, the last fan's among them): exact on a
    checkpoint, interpolated between two (as waiting.js does). A key past the last checkpoint
    joined after the sketch: at the back. A key before the first: at the front (those ahead
    have left since)."""
    if not checkpoints or order_key < checkpoints[0][1]:
        return 0
    lo, hi = 0, len(checkpoints) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if checkpoints[mid][1] <= order_key:
            lo = mid
        else:
            hi = mid - 1
    r0, k0 = checkpoints[lo]
    if k0 == order_key:
        return r0
    if lo == len(checkpoints) - 1:
        return max(r0 + 1, count)
    r1, k1 = checkpoints[lo + 1]
    guess = round(r0 + (order_key - k0) / (k1 - k0) * (r1 - r0))
    return min(r1 - 1, max(r0 + 1, guess))
