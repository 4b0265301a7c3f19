"""How many fans to let in now, and from which tiers. Pure: no I/O, ``now`` passed in.

- Batch size: ``n = min(capacity - active, rate tokens, rate window room, batch limit)``.
- Rate: credit earned from the time elapsed since the last admission run, at
  ``rate_per_minute / 60`` per second, carried over (fractions too) and capped at a small
  burst (``burst_seconds`` worth, at least one), so a tick that runs late admits what the time
  it missed earned instead of losing it, and a long idle spell cannot flood the shop; plus a
  hard sliding window so that no 60-second window ever holds more than ``rate_per_minute``
  admissions. (A token bucket whose size is the burst cap: the same thing, said as time.)
- Tiers, in service order (priority, id): a strict tier (share 0) is emptied before any tier
  after it; a run of consecutive weighted tiers (share > 0) splits what is left by weight with
  smooth weighted round-robin, whose credits carry over between batches so that even a batch
  of one eventually serves every weighted tier (no starvation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from queueing.rules.layout import service_groups

RATE_WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class TokenBucket:
    tokens: float
    refilled_at: datetime | None


def one_second_of(rate_per_minute: int) -> float:
    return max(1.0, rate_per_minute / 60.0)


def burst_cap(rate_per_minute: int, burst_seconds: float) -> float:
    """The most credit that may build up: ``burst_seconds`` of the pace, at least one fan."""
    return max(1.0, rate_per_minute / 60.0 * burst_seconds)


def bucket_refill(
    bucket: TokenBucket, *, rate_per_minute: int, burst_seconds: float, now: datetime
) -> TokenBucket:
    """Credit for the time elapsed since the last run. A new on-sale starts with one second's
    worth, so its first minute is paced like every other."""
    cap = burst_cap(rate_per_minute, burst_seconds)
    if bucket.refilled_at is None:
        return TokenBucket(tokens=min(cap, one_second_of(rate_per_minute)), refilled_at=now)
    elapsed = max(0.0, (now - bucket.refilled_at).total_seconds())
    tokens = min(cap, bucket.tokens + elapsed * rate_per_minute / 60.0)
    return TokenBucket(tokens=tokens, refilled_at=now)


def batch_size(
    *,
    capacity: int,
    active: int,
    rate_per_minute: int,
    tokens: float,
    admitted_in_window: int,
    batch_limit: int,
) -> int:
    """How many may be admitted now. ``capacity``/``rate_per_minute`` 0 mean no limit."""
    n = batch_limit
    if capacity:
        n = min(n, capacity - active)
    if rate_per_minute:
        n = min(n, math.floor(tokens + 1e-9), rate_per_minute - admitted_in_window)
    return max(0, n)


@dataclass(frozen=True)
class TierDemand:
    tier_id: int
    share: int  # 0 = strict priority
    waiting: int


@dataclass(frozen=True)
class BatchSplit:
    take: dict[int, int]  # tier id -> how many to admit from it
    credit: dict[int, int]  # weighted round-robin credits to keep for the next batch


def split_batch(tiers: list[TierDemand], n: int, credit: dict[int, int]) -> BatchSplit:
    take = {tier.tier_id: 0 for tier in tiers}
    credit = {tier.tier_id: credit.get(tier.tier_id, 0) for tier in tiers if tier.share}
    remaining = n
    for group in service_groups(tiers):
        if remaining <= 0:
            break
        if not group[0].share:
            tier = group[0]
            take[tier.tier_id] = min(remaining, tier.waiting)
            remaining -= take[tier.tier_id]
            continue
        while remaining > 0:
            open_tiers = [t for t in group if take[t.tier_id] < t.waiting]
            if not open_tiers:
                break
            total = sum(t.share for t in open_tiers)
            for t in open_tiers:
                credit[t.tier_id] += t.share
            chosen = max(open_tiers, key=lambda t: credit[t.tier_id])
            credit[chosen.tier_id] -= total
            take[chosen.tier_id] += 1
            remaining -= 1
    return BatchSplit(take=take, credit=credit)
