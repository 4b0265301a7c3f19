from datetime import UTC, datetime, timedelta

from queueing.rules.admission_plan import (
    TierDemand,
    TokenBucket,
    batch_size,
    bucket_refill,
    split_batch,
)
from queueing.rules.layout import EventLayout, TierLayout
from queueing.rules.positions import position_in_line

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


def test_the_bucket_paces_admissions_evenly() -> None:
    bucket = bucket_refill(TokenBucket(0.0, None), rate_per_minute=120, now=T0)
    assert bucket.tokens == 2.0  # a full second's worth to start
    drained = TokenBucket(0.0, T0)
    assert bucket_refill(drained, rate_per_minute=120, now=T0 + timedelta(seconds=0.5)).tokens == 1
    # Never more than one second's worth, however long it sat idle.
    assert bucket_refill(drained, rate_per_minute=120, now=T0 + timedelta(hours=1)).tokens == 2
    assert bucket_refill(drained, rate_per_minute=6, now=T0 + timedelta(hours=1)).tokens == 1


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
