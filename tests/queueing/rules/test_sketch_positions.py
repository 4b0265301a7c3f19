"""Placing a fan from a sketch of the line (a tick's checkpoints, a snapshot's): the rule the
waiting page uses, and the server's answer where the sketch cannot place the fan. Pure."""

from __future__ import annotations

import random

import pytest

from queueing.rules.layout import (
    EventLayout,
    SketchedPosition,
    TierLayout,
    position_from_sketch,
    position_in_line,
    rank_from_checkpoints,
)

# Ranks 0..4 every one, then every fifth: keys are 10 apart.
CHECKPOINTS = ((0, 100), (1, 110), (2, 120), (3, 130), (4, 140), (9, 190), (14, 240))
ONE_TIER = EventLayout(
    event_id=1, slug="x", heartbeat_seconds=60, pace=None, tiers=(TierLayout(7, 10, 0),)
)


@pytest.mark.parametrize(
    ("key", "rank"),
    [(100, 0), (130, 3), (190, 9), (240, 14), (150, 5), (165, 7), (185, 8), (191, 10)],
)
def test_a_key_on_a_checkpoint_or_between_two_is_placed(key: int, rank: int) -> None:
    assert rank_from_checkpoints(CHECKPOINTS, key) == rank


@pytest.mark.parametrize("key", [99, 241, 105, 135])
def test_a_key_the_sketch_cannot_place_has_no_rank(key: int) -> None:
    # Before the first, past the last, between two neighbouring ranks.
    assert rank_from_checkpoints(CHECKPOINTS, key) is None


def test_interpolation_rounds_halves_up_as_the_page_does() -> None:
    assert rank_from_checkpoints(((0, 0), (2, 4)), 2) == 1
    assert rank_from_checkpoints(((0, 0), (3, 6)), 3) == 2  # 1.5 -> 2 (Math.round)


def test_a_checkpoint_is_exact_and_a_guess_is_not() -> None:
    on = position_from_sketch(
        ONE_TIER, tier_id=7, order_key=190, checkpoints=CHECKPOINTS, tier_counts=(15,)
    )
    between = position_from_sketch(
        ONE_TIER, tier_id=7, order_key=200, checkpoints=CHECKPOINTS, tier_counts=(15,)
    )
    assert on == SketchedPosition(position=10, exact=True)
    assert between == SketchedPosition(position=11, exact=False)


def test_a_fan_the_sketch_cannot_place_gets_the_nearest_rank_it_allows() -> None:
    def place(key: int) -> SketchedPosition:
        return position_from_sketch(
            ONE_TIER, tier_id=7, order_key=key, checkpoints=CHECKPOINTS, tier_counts=(15,)
        )

    assert place(99) == SketchedPosition(position=1, exact=False)  # ahead of the first
    assert place(500) == SketchedPosition(position=16, exact=False)  # joined after the sketch
    assert place(135) == SketchedPosition(position=5, exact=False)  # between neighbours
    empty = position_from_sketch(ONE_TIER, tier_id=7, order_key=5, checkpoints=(), tier_counts=(0,))
    assert empty == SketchedPosition(position=1, exact=False)


def test_the_tiers_ahead_count_as_the_line_rule_says() -> None:
    layout = EventLayout(
        event_id=1,
        slug="x",
        heartbeat_seconds=60,
        pace=None,
        tiers=(TierLayout(3, 10, 0), TierLayout(7, 20, 2), TierLayout(9, 20, 1)),
    )
    placed = position_from_sketch(
        layout, tier_id=9, order_key=190, checkpoints=CHECKPOINTS, tier_counts=(40, 100, 15)
    )
    assert placed.position == position_in_line(
        layout, tier_id=9, rank_in_tier=9, tier_counts=(40, 100, 15)
    )


def test_on_generated_lines_a_guess_stays_between_its_checkpoints() -> None:
    rng = random.Random(18)
    for _ in range(300):
        keys = sorted(rng.sample(range(10**6), rng.randint(2, 400)))
        ranks = sorted({0, len(keys) - 1, *rng.sample(range(len(keys)), min(len(keys), 12))})
        checkpoints = tuple((r, keys[r]) for r in ranks)
        for rank, key in enumerate(keys):
            guess = rank_from_checkpoints(checkpoints, key)
            lower = max(r for r in ranks if r <= rank)
            upper = min((r for r in ranks if r >= rank), default=lower)
            if guess is None:
                assert upper - lower <= 1
                continue
            assert lower <= guess <= upper
            assert (guess == rank) if rank in ranks else lower < guess < upper
