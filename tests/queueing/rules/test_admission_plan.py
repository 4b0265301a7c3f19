from datetime import UTC, datetime, timedelta

from queueing.rules.admission_plan import (
    TierDemand,
    TokenBucket,
    batch_size,
    bucket_refill,
    split_batch,
)
from queueing.rules.layout import EventLayout, TierLayout, position_in_line

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_capacity_rate_and_batch_limit_all_cap_the_batch() -> None:
    common = dict(tokens=100.0, admitted_in_window=0, batch_limit=500)
    assert batch_size(capacity=3, active=0, rate_per_minute=0, **common) == 3
    assert batch_size(capacity=3, active=3, rate_per_minute=0, **common) == 0
    assert batch_size(capacity=3, active=5, rate_per_minute=0, **common) == 0
    assert batch_size(capacity=0, active=99, rate_per_minute=0, **common) == 500
    assert (
        batch_size(
            capacity=0,
            active=0,
            rate_per_minute=60,
            tokens=2.5,
            admitted_in_window=0,
            batch_limit=500,
        )
        == 2
    )
    assert (
        batch_size(
            capacity=0,
            active=0,
            rate_per_minute=60,
            tokens=50,
            admitted_in_window=59,
            batch_limit=500,
        )
        == 1
    )


def test_credit_comes_from_elapsed_time_up_to_a_small_burst() -> None:
    bucket = bucket_refill(TokenBucket(0.0, None), rate_per_minute=120, burst_seconds=3, now=T0)
    assert bucket.tokens == 2.0  # one second's worth to start
    drained = TokenBucket(0.0, T0)

    def after(seconds: float, rate: int = 120, burst: float = 3) -> float:
        later = T0 + timedelta(seconds=seconds)
        return bucket_refill(drained, rate_per_minute=rate, burst_seconds=burst, now=later).tokens

    assert after(0.5) == 1
    # A tick that runs 2.5 s late still gets the 2.5 s of pace it missed...
    assert after(2.5) == 5
    # ...but however long it sat idle, never more than the burst cap.
    assert after(3600) == 6
    assert after(3600, rate=6) == 1  # at least one fan, whatever the pace
    assert after(3600, burst=0) == 1


def test_late_ticks_keep_the_exact_pace() -> None:
    """Ticks at uneven, late intervals (up to the burst) admit exactly rate x time."""
    rate, bucket, admitted, now = 600, TokenBucket(0.0, None), 0, T0
    gaps = [1.0, 1.4, 0.6, 2.2, 1.0, 0.3, 1.7, 1.0] * 8
    for gap in gaps:
        now += timedelta(seconds=gap)
        bucket = bucket_refill(bucket, rate_per_minute=rate, burst_seconds=3, now=now)
        take = batch_size(
            capacity=0,
            active=0,
            rate_per_minute=rate,
            tokens=bucket.tokens,
            admitted_in_window=0,
            batch_limit=500,
        )
        admitted += take
        bucket = TokenBucket(bucket.tokens - take, bucket.refilled_at)
    elapsed = sum(gaps)
    # The first second's worth, plus what every second after earned (less a fraction held).
    assert rate / 60 * elapsed <= admitted + 1 <= rate / 60 * (elapsed + 1) + 1


def test_strict_tiers_are_emptied_in_order() -> None:
    tiers = [TierDemand(1, 0, 2), TierDemand(2, 0, 10)]
    assert split_batch(tiers, 5, {}).take == {1: 2, 2: 3}


def test_weighted_tiers_split_by_weight_and_none_starves() -> None:
    tiers = [TierDemand(1, 3, 1000), TierDemand(2, 1, 1000)]
    assert split_batch(tiers, 8, {}).take == {1: 6, 2: 2}
    # Batches of one: the credits carry over, so the light tier gets its turn.
    credit: dict[int, int] = {}
    served = {1: 0, 2: 0}
    for _ in range(40):
        split = split_batch(tiers, 1, credit)
        credit = split.credit
        for tier_id, k in split.take.items():
            served[tier_id] += k
    assert served == {1: 30, 2: 10}


def test_a_weighted_tier_that_runs_out_leaves_its_share_to_the_others() -> None:
    tiers = [TierDemand(1, 5, 1), TierDemand(2, 1, 100)]
    assert split_batch(tiers, 6, {}).take == {1: 1, 2: 5}


def test_strict_tiers_come_before_a_weighted_group_after_them() -> None:
    tiers = [TierDemand(9, 0, 2), TierDemand(1, 1, 50), TierDemand(2, 1, 50)]
    assert split_batch(tiers, 6, {}).take == {9: 2, 1: 2, 2: 2}


def test_positions_in_weighted_tiers_follow_the_weights() -> None:
    layout = EventLayout(
        event_id=1,
        slug="x",
        heartbeat_seconds=60,
        pace=None,
        tiers=(TierLayout(9, 0, 0), TierLayout(1, 10, 3), TierLayout(2, 20, 1)),
    )
    counts = (4, 100, 100)
    assert position_in_line(layout, tier_id=9, rank_in_tier=0, tier_counts=counts) == 1
    # The heavy tier's 7th fan: 4 strict fans, 6 of its own, and 6 * 1/3 = 2 light ones ahead.
    assert position_in_line(layout, tier_id=1, rank_in_tier=6, tier_counts=counts) == 13
    # The light tier's 3rd fan: 4 strict, 2 of its own, and 2 * 3 = 6 heavy ones ahead.
    assert position_in_line(layout, tier_id=2, rank_in_tier=2, tier_counts=counts) == 13
