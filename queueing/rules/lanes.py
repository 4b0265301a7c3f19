"""Which lane of an on-sale's line a fan is in. Pure: no I/O.

A line of many lanes spreads over a Redis Cluster's masters, each lane under its own hash tag
(queueing/hot/keys.py). The lane is a keyed hash of the fan's identity, so a fan always lands
in the same lane whatever process takes the join, and nobody without the room's secret key
can pick their lane (or crowd one). The key is derived from ``SECRET_KEY`` by Django's
``salted_hmac`` (HMAC-SHA256) under a salt of its own.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from django.utils.crypto import salted_hmac

_SALT = "waitingroom.lane"


def lane_of(identity: str, *, lanes: int) -> int:
    """The fan's lane, 0 to ``lanes - 1``; always 0 in a line of one lane."""
    if lanes <= 1:
        return 0
    digest = salted_hmac(_SALT, identity, algorithm="sha256").digest()
    return int.from_bytes(digest[:8], "big") % lanes


def first_in_lane(identities: Iterable[str], *, lanes: int, lane: int) -> str:
    """The first of ``identities`` whose lane is ``lane`` (``lane_of``, with the key derived
    once rather than per identity). ``identities`` must not run out: about ``lanes`` of them
    are tried."""
    keyed = salted_hmac(_SALT, "", algorithm="sha256")  # the key, before any message
    for identity in identities:
        if lanes <= 1:
            return identity
        candidate = keyed.copy()
        candidate.update(identity.encode())
        if int.from_bytes(candidate.digest()[:8], "big") % lanes == lane:
            return identity
    raise ValueError("no identity in the lane")


# ------------------------------------------------ the other lanes, from their summary
#
# A fan's own lane tells their exact rank there (one script on their lane's master); how many
# wait ahead in the other lanes comes from a summary of each lane (per tier: its count and
# (rank, order key) checkpoints) that the tick reads every second, so that a poll never asks
# every lane's master. Every rank of a lane's first SUMMARY_FRONT is a checkpoint, then they
# are at most SUMMARY_GAP of the rank apart: a count read between two checkpoints is off by
# less than the gap, so the whole answer by less than SUMMARY_GAP of the position.
SUMMARY_FRONT = 100
SUMMARY_GAP = 0.01
_MAX_RANK = 10**9


def summary_ranks() -> list[int]:
    """The ranks a lane's summary holds a checkpoint at (sketch.lua adds each tier's last)."""
    ranks = list(range(SUMMARY_FRONT))
    rank = SUMMARY_FRONT
    while rank < _MAX_RANK:
        ranks.append(rank)
        rank = max(rank + 1, int(rank * (1 + SUMMARY_GAP)))
    return ranks


@dataclass(frozen=True)
class LaneTier:
    count: int
    # (0-based rank, order key), ascending, the tier's last rank among them.
    checkpoints: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LaneSummary:
    lane: int
    prequeue: int
    tiers: Mapping[int, LaneTier]  # by tier id
    # This lane's copy of the admission counts when the summary was read, by tier id: let in
    # from the whole line, and from this lane (queueing/hot/line_index.py ``admitted_count``).
    let_in_total: Mapping[int, int] = field(default_factory=dict)
    let_in_here: Mapping[int, int] = field(default_factory=dict)


def checkpoints_counting(below: int, order_key: int) -> tuple[tuple[int, int], ...]:
    """Checkpoints from which ``count_below`` tells exactly ``below`` for ``order_key`` (and
    nothing exact for any other key): a lane's tier as one fan's join view holds it."""
    if below <= 0:
        return ((0, order_key),)
    return ((below - 1, order_key - 1), (below, order_key))


def count_below(tier: LaneTier, order_key: int) -> tuple[int, bool]:
    """How many of a lane's tier hold an order key below ``order_key``, and whether that
    was counted (True) or read between two checkpoints (False: off by less than their gap)."""
    points = tier.checkpoints
    if not points or points[0][1] >= order_key:
        return 0, True
    # The last checkpoint below the key.
    lo = bisect.bisect_left(points, order_key, key=lambda point: point[1]) - 1
    rank_lo, key_lo = points[lo]
    if lo == len(points) - 1:
        return tier.count if rank_lo == tier.count - 1 else rank_lo + 1, rank_lo == tier.count - 1
    rank_hi, key_hi = points[lo + 1]
    if key_hi == order_key or rank_hi == rank_lo + 1:
        return rank_hi, True
    # Between: at least rank_lo + 1 (the checkpoint itself is below), at most rank_hi.
    fraction = (order_key - key_lo) / (key_hi - key_lo)
    guess = rank_lo + 1 + math.floor(fraction * (rank_hi - rank_lo - 1) + 0.5)
    return min(rank_hi, max(rank_lo + 1, guess)), False


@dataclass(frozen=True)
class AcrossLanes:
    rank_in_tier: int | None  # ahead in the fan's tier, every lane (None: not in a tier)
    tier_counts: tuple[int, ...]  # every lane's, in the layout's tier order
    prequeue: int
    exact: bool


def across_lanes(
    tier_ids: Sequence[int],
    *,
    lane: int,
    tier_id: int,
    rank_in_lane: int | None,
    order_key: int | None,
    own_prequeue: int,
    own_counts: Sequence[int],
    summaries: Sequence[LaneSummary],
    let_in: tuple[int, int] = (0, 0),
) -> AcrossLanes:
    """A fan's figures for the whole line: their own lane's (exact) and, from the summaries,
    every other lane's: its counts, and in the fan's tier those with a smaller order key.

    A summary is up to a second old, and admission may have let in hundreds since. Every fan
    it let in from the fan's tier while the fan waited was ahead of them (it lets a tier in
    in order-key order across the lanes), and those from the other lanes are still in the
    summary: they are taken off. ``let_in`` is the tier's admission counts as the fan's lane
    holds them now (from the whole line, from this lane); the own lane's summary holds them
    as they were, so the other lanes' part since is the difference of the two differences."""
    counts = list(own_counts) + [0] * (len(tier_ids) - len(own_counts))
    prequeue = own_prequeue
    rank = rank_in_lane
    exact = True
    for summary in summaries:
        if summary.lane == lane:
            continue
        prequeue += summary.prequeue
        for index, tid in enumerate(tier_ids):
            tier = summary.tiers.get(tid)
            if tier is None:
                continue
            counts[index] += tier.count
            if tid == tier_id and rank is not None and order_key is not None:
                below, counted = count_below(tier, order_key)
                rank += below
                exact = exact and counted
    own = next((summary for summary in summaries if summary.lane == lane), None)
    if rank is not None and rank_in_lane is not None and own is not None:
        since = (let_in[0] - own.let_in_total.get(tier_id, 0)) - (
            let_in[1] - own.let_in_here.get(tier_id, 0)
        )
        if since > 0:
            rank = max(rank_in_lane, rank - since)
            index = list(tier_ids).index(tier_id) if tier_id in tier_ids else None
            if index is not None:
                counts[index] = max(0, counts[index] - since)
    return AcrossLanes(rank_in_tier=rank, tier_counts=tuple(counts), prequeue=prequeue, exact=exact)


def merged_checkpoints(
    tier_id: int, summaries: Sequence[LaneSummary], *, ranks: Sequence[int]
) -> tuple[int, tuple[tuple[int, int], ...]]:
    """One tier of the whole line, for a tick: its count, and ``(rank, order key)``
    checkpoints at about ``ranks`` (ascending; the last fan's always), each a lane's
    checkpoint placed among the other lanes by their summaries (exact in the lanes' fronts,
    within the gap behind). The whole line's rank grows with the key, so each wanted rank
    is found by a binary search over the lanes' checkpoints in key order: O(ranks * log n *
    lanes), not a placing of every checkpoint."""
    tiers = [(s.lane, s.tiers[tier_id]) for s in summaries if tier_id in s.tiers]
    count = sum(tier.count for _, tier in tiers)
    placed = sorted((key, rank, lane) for lane, tier in tiers for rank, key in tier.checkpoints)
    wholes: dict[int, int] = {}

    def whole(index: int) -> int:
        if index not in wholes:
            key, rank, lane = placed[index]
            wholes[index] = rank + sum(
                count_below(other, key)[0] for o, other in tiers if o != lane
            )
        return wholes[index]

    points: list[tuple[int, int]] = []
    low = 0
    for target in ranks:
        if low >= len(placed):
            break
        found = bisect.bisect_left(range(len(placed)), target, lo=low, key=whole)
        if found >= len(placed):
            break
        at = whole(found)
        if not points or at > points[-1][0]:
            points.append((at, placed[found][0]))
        low = found + 1
    if placed and (not points or points[-1][1] != placed[-1][0]):
        points.append((whole(len(placed) - 1), placed[-1][0]))
    return count, tuple(points)
