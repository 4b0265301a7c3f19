"""A fan's lane (a keyed hash of their identity) and the whole line's figures from the
other lanes' summaries: within 1 % of the position."""

import random

from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from queueing.rules.lanes import (
    SUMMARY_FRONT,
    LaneSummary,
    LaneTier,
    across_lanes,
    checkpoints_counting,
    count_below,
    lane_of,
    merged_checkpoints,
    summary_ranks,
)


def test_one_lane_is_lane_0_for_everyone() -> None:
    assert {lane_of(f"id-{i}", lanes=1) for i in range(100)} == {0}


def test_a_fans_lane_is_fixed_spread_and_keyed_by_the_secret() -> None:
    identities = [f"user:{i}" for i in range(4000)]
    lanes = [lane_of(identity, lanes=8) for identity in identities]
    assert lanes == [lane_of(identity, lanes=8) for identity in identities]
    counts = [lanes.count(lane) for lane in range(8)]
    assert min(counts) > 400 and max(counts) < 600  # about 500 each
    with override_settings(SECRET_KEY="another-secret-key-for-this-test-only-0123456789"):
        other = [lane_of(identity, lanes=8) for identity in identities]
    assert other != lanes


def test_the_summary_is_exact_at_the_front_then_at_most_1_percent_apart() -> None:
    ranks = summary_ranks()
    assert ranks[:SUMMARY_FRONT] == list(range(SUMMARY_FRONT))
    for low, high in zip(ranks[SUMMARY_FRONT - 1 :], ranks[SUMMARY_FRONT:], strict=False):
        assert 0 < high - low <= max(1, low // 100)


def _tier(keys: list[int], ranks: list[int]) -> LaneTier:
    keys = sorted(keys)
    points = [(r, keys[r]) for r in ranks if r < len(keys)]
    if keys and points[-1][0] != len(keys) - 1:
        points.append((len(keys) - 1, keys[-1]))
    return LaneTier(count=len(keys), checkpoints=tuple(points))


def test_counts_below_a_key_are_within_1_percent() -> None:
    rng = random.Random(7)
    keys = sorted(rng.sample(range(10**7), 50_000))
    tier = _tier(keys, summary_ranks())
    for probe in rng.sample(range(10**7), 2000):
        exact = sum(1 for k in keys if k < probe)
        found, counted = count_below(tier, probe)
        assert abs(found - exact) <= max(0, exact // 100)
        assert counted or exact >= SUMMARY_FRONT


def test_the_whole_line_is_the_own_lane_plus_the_others_ahead() -> None:
    a = LaneSummary(lane=0, prequeue=1, tiers={5: _tier([1, 4, 9], summary_ranks())})
    b = LaneSummary(lane=1, prequeue=2, tiers={5: _tier([2, 3, 10], summary_ranks())})
    whole = across_lanes(
        [5],
        lane=0,
        tier_id=5,
        rank_in_lane=2,  # key 9 in lane 0
        order_key=9,
        own_prequeue=1,
        own_counts=[3],
        summaries=[a, b],
    )
    assert (whole.rank_in_tier, whole.tier_counts, whole.prequeue, whole.exact) == (
        4,
        (6,),
        3,
        True,
    )
    count, points = merged_checkpoints(5, [a, b], ranks=range(10))
    assert count == 6
    assert points == ((0, 1), (1, 2), (2, 3), (3, 4), (4, 9), (5, 10))


def test_fans_let_in_since_the_summary_are_not_counted_ahead() -> None:
    # Lane 1's summary is a second old: it still holds the 1,000 fans admission let in from
    # it since (every fan let in from the tier was ahead: it goes in order-key order), while
    # the fan's own lane (0) counts them now. A fan who came back and went ahead of the line
    # (with a key below everyone's) stays counted.
    rng = random.Random(11)
    keys = sorted(rng.sample(range(10**6), 20_000))
    came_back = -5
    stale = LaneSummary(lane=1, prequeue=0, tiers={5: _tier([came_back, *keys], summary_ranks())})
    own = LaneSummary(
        lane=0,
        prequeue=0,
        tiers={5: _tier([], summary_ranks())},
        let_in_total={5: 300},
        let_in_here={5: 40},
    )
    for probe in rng.sample(keys[1000:], 200):
        whole = across_lanes(
            [5],
            lane=0,
            tier_id=5,
            rank_in_lane=0,
            order_key=probe,
            own_prequeue=0,
            own_counts=[1],
            summaries=[own, stale],
            let_in=(300 + 1000 + 7, 40 + 7),  # 7 let in from lane 0 since, 1,000 from lane 1
        )
        exact = 1 + sum(1 for k in keys[1000:] if k < probe)
        assert whole.rank_in_tier is not None
        assert abs(whole.rank_in_tier - exact) <= max(10, exact // 100), (probe, exact)


@given(below=st.integers(min_value=0, max_value=10**6), key=st.integers(2, 10**12))
def test_a_join_views_checkpoints_count_exactly_for_the_fans_key(below: int, key: int) -> None:
    tier = LaneTier(count=below + 5, checkpoints=checkpoints_counting(below, key))
    assert count_below(tier, key) == (below, True)
