"""The staff preview's simulation (queueing/rules/forecast.py), on lines worked out by hand."""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import pytest

from queueing.rules.forecast import (
    HORIZON_SECONDS,
    MAX_SAMPLES,
    ArrivalSegment,
    ForecastInputs,
    forecast,
    shop_stay_seconds,
)


def inputs(**fields: Any) -> ForecastInputs:
    base: dict[str, Any] = {
        "capacity": 0,
        "rate_per_minute": 0,
        "session_seconds": 600,
        "shop_seconds": 120.0,
        "arrivals": (),
    }
    return ForecastInputs(**(base | fields))


def test_a_paced_line_lets_in_one_a_second() -> None:
    """120 at once, 60 a minute: the first run has a second's credit (one fan), each tick
    after it earns one more. The first goes at the start, the 60th at 59 s, the last at
    119 s, and then the line is empty."""
    result = forecast(inputs(rate_per_minute=60, prequeue_fans=120))
    assert result.first_wait == 0
    assert result.median_wait == pytest.approx(59)
    assert result.last_wait == pytest.approx(119)
    assert result.empty_at == pytest.approx(119)
    assert result.peak_line == 120
    assert result.admitted == result.fans == 120
    assert result.pace_per_minute == 60


def test_fans_at_once_after_the_start_count_as_the_pre_queue_does() -> None:
    """The same 120 as a segment of no minutes: the same waits."""
    result = forecast(inputs(rate_per_minute=60, arrivals=(ArrivalSegment(0, 120),)))
    assert (result.first_wait, result.last_wait) == (0, pytest.approx(119))


def test_the_burst_cap_keeps_a_fast_rate_to_its_credit() -> None:
    """600 a minute is 10 a tick: 1,000 at once take 100 ticks (the first run's credit is
    one second's, 10), whatever the batch limit allows."""
    result = forecast(inputs(rate_per_minute=600, prequeue_fans=1000, batch_limit=500))
    assert result.last_wait == pytest.approx(99)


def test_the_batch_limit_caps_a_sale_without_limits() -> None:
    """No capacity, no rate: 500 a tick (WR_ADMISSION_BATCH). 2,000 at once: four ticks."""
    result = forecast(inputs(prequeue_fans=2000, batch_limit=500))
    assert result.last_wait == pytest.approx(3)
    assert result.pace_per_minute is None


def test_a_capacity_bound_line_moves_at_capacity_over_the_time_in_the_shop() -> None:
    """10 places, 20 s in the shop on average: 10 go in at the first tick, then a place
    frees every 2 s and is refilled at once. The last of 1,000 waits (1,000 - 10) × 2 s."""
    result = forecast(inputs(capacity=10, shop_seconds=20.0, prequeue_fans=1000))
    assert result.first_wait == 0
    assert result.last_wait == pytest.approx(1980, rel=0.005)
    assert result.pace_per_minute == pytest.approx(30, rel=0.001)


def test_freed_places_are_refilled_between_ticks() -> None:
    """Stays shorter than a tick: the room's slot-freed runs keep the shop full, so the
    pace is capacity / stay (50 a second), not capacity a tick (10)."""
    result = forecast(inputs(capacity=10, shop_seconds=0.2, prequeue_fans=1000))
    assert result.last_wait == pytest.approx(990 / 50, rel=0.05)


def test_the_session_ends_stays_that_run_long() -> None:
    """A mean of 100 s in the shop but a session of 100 s: a fan holds a place
    100 × (1 - e^-1) = 63.2 s on average, so 10 places let in 0.158 a second."""
    result = forecast(
        inputs(capacity=10, shop_seconds=100.0, session_seconds=100, prequeue_fans=1000)
    )
    stay = 100 * (1 - math.exp(-1))
    assert shop_stay_seconds(inputs(shop_seconds=100.0, session_seconds=100)) == pytest.approx(stay)
    assert result.last_wait == pytest.approx(990 * stay / 10, rel=0.01)


def test_rate_and_capacity_the_tighter_one_sets_the_pace() -> None:
    """Capacity 100 and 60 s in the shop allow 100 a minute; the rate allows 60: the rate
    sets it. Raise the rate to 600 and the shop does."""
    slow = forecast(inputs(capacity=100, rate_per_minute=60, shop_seconds=60.0, prequeue_fans=600))
    fast = forecast(inputs(capacity=100, rate_per_minute=600, shop_seconds=60.0, prequeue_fans=600))
    assert slow.last_wait == pytest.approx(599, rel=0.01)
    # 100 at once (the burst lets in 10 a tick: the first 100 in 10 s), then 100 a minute.
    assert fast.last_wait == pytest.approx(500 * 60 / 100 + 10, rel=0.05)
    assert slow.pace_per_minute == 60
    assert fast.pace_per_minute == pytest.approx(100, rel=0.001)


def test_the_pre_queue_goes_first_and_later_fans_queue_behind() -> None:
    """60 in the pre-queue and 60 over the first minute, 60 a minute: the pre-queue takes the
    first minute, so the last to arrive (at 60 s) goes in at 119 s."""
    result = forecast(
        inputs(rate_per_minute=60, prequeue_fans=60, arrivals=(ArrivalSegment(1, 60),))
    )
    assert result.first_wait == 0
    assert result.last_wait == pytest.approx(59, abs=1)
    assert result.empty_at == pytest.approx(119, abs=1)


def test_arrivals_slower_than_the_pace_wait_for_the_next_tick_only() -> None:
    result = forecast(
        inputs(rate_per_minute=600, arrivals=(ArrivalSegment(minutes=10, fans=3000),))
    )
    assert result.last_wait is not None and result.last_wait < 1
    assert result.empty_at == pytest.approx(600, abs=1)
    assert result.peak_line <= 6
    assert result.throughput_per_minute == pytest.approx(300, rel=0.01)


def test_a_line_that_grows_faster_than_it_moves() -> None:
    """4 a second arrive for 40 s, 2 a second go in (5 places, 2.5 s each): 80 are left at
    40 s, and the last waits about 40 s."""
    result = forecast(
        inputs(capacity=5, shop_seconds=2.5, arrivals=(ArrivalSegment(minutes=40 / 60, fans=160),))
    )
    assert result.last_wait == pytest.approx(40, rel=0.05)
    assert result.peak_line == pytest.approx(80, rel=0.05)
    assert result.empty_at == pytest.approx(80, rel=0.05)


def test_segments_follow_one_another() -> None:
    """600 in the first minute and 600 in the next ten, 1,200 a minute: nobody waits more
    than a tick, and the line is empty when the second segment ends."""
    result = forecast(
        inputs(
            rate_per_minute=1200,
            arrivals=(ArrivalSegment(1, 600), ArrivalSegment(10, 600)),
        )
    )
    assert result.fans == 1200
    assert result.last_wait is not None and result.last_wait < 1
    assert result.empty_at == pytest.approx(660, abs=1)


def test_those_who_give_up_take_no_place() -> None:
    full = forecast(inputs(rate_per_minute=60, prequeue_fans=100))
    fewer = forecast(inputs(rate_per_minute=60, prequeue_fans=100, abandon_share=0.5))
    assert fewer.fans == 50
    assert fewer.last_wait == pytest.approx(49)
    assert full.last_wait == pytest.approx(99)


def test_a_tail_keeps_coming_after_the_curve() -> None:
    """2,000 in the first minute, then 300 a minute, 600 a minute let in: 1,400 are left at
    one minute and the line shrinks by 300 a minute, so it is down to the tail's own trickle
    at about 60 + 1,400 / 5 = 340 s. The last of the 2,000 goes in at 200 s."""
    result = forecast(
        inputs(rate_per_minute=600, arrivals=(ArrivalSegment(1, 2000),), tail_per_minute=300)
    )
    assert result.fans == 2000
    assert result.last_wait == pytest.approx(140, abs=2)
    assert result.empty_at == pytest.approx(340, abs=2)
    assert result.admitted > 2000  # the tail's fans too


def test_a_tail_faster_than_the_pace_never_empties() -> None:
    result = forecast(
        inputs(rate_per_minute=60, prequeue_fans=10, tail_per_minute=120, horizon_seconds=3600)
    )
    assert result.last_wait == pytest.approx(9)
    assert result.empty_at is None


def test_a_line_that_never_empties_within_the_horizon() -> None:
    """One place held for 10 minutes: 100,000 fans would take about 1.2 years."""
    result = forecast(inputs(capacity=1, shop_seconds=600.0, prequeue_fans=100_000))
    assert result.empty_at is None
    assert result.last_wait is None and result.median_wait is None
    assert result.first_wait == 0
    assert result.horizon_seconds == HORIZON_SECONDS
    assert len(result.samples) <= MAX_SAMPLES
    assert result.samples[-1].second == pytest.approx(HORIZON_SECONDS)


def test_the_samples_are_the_line_and_the_shop_over_time() -> None:
    result = forecast(inputs(capacity=10, shop_seconds=20.0, prequeue_fans=1000))
    assert len(result.samples) <= MAX_SAMPLES
    assert result.samples[0].in_line == 1000 and result.samples[0].in_shop == 0
    assert all(s.in_shop <= 10 + 1e-9 for s in result.samples)
    gaps = [b.second - a.second for a, b in pairwise(result.samples)]
    # Evenly spaced, but for the last one, where the simulation stopped.
    assert len(set(gaps[:-1])) == 1 and 0 < gaps[-1] <= gaps[0]
    assert result.samples[-1].second == pytest.approx(result.empty_at, abs=1)


def test_a_sub_second_tick_over_a_day_takes_longer_steps() -> None:
    """A day of 0.2 s ticks would be 432,000 steps: the step grows so a preview stays cheap,
    and the waits hardly change (the rules pace by time, not by tick)."""
    fine = forecast(inputs(capacity=100, shop_seconds=60.0, prequeue_fans=20_000, tick_seconds=0.2))
    plain = forecast(inputs(capacity=100, shop_seconds=60.0, prequeue_fans=20_000))
    assert fine.step_seconds == pytest.approx(0.96)
    assert fine.last_wait == pytest.approx(plain.last_wait, rel=0.01)


def test_fifty_thousand_over_hours_finish() -> None:
    """A size staff will try: 50,000 in ten minutes into a shop of 2,000 at 3,000 a minute,
    five minutes each on average but a session of ten: a place is held 300 × (1 - e^-2) =
    259 s, so the shop lets in 463 a minute, and the line is gone after about 104 minutes."""
    result = forecast(
        inputs(
            capacity=2000,
            rate_per_minute=3000,
            shop_seconds=300.0,
            arrivals=(ArrivalSegment(minutes=10, fans=50_000),),
        )
    )
    assert result.empty_at is not None and result.last_wait is not None
    assert result.pace_per_minute == pytest.approx(2000 * 60 / (300 * (1 - math.exp(-2))))
    assert result.empty_at == pytest.approx((50_000 - 2000) / 462.6 * 60, rel=0.02)


@pytest.mark.parametrize(
    "wrong",
    [
        {"capacity": -1},
        {"shop_seconds": 0.0},
        {"abandon_share": 1.0},
        {"arrivals": (ArrivalSegment(-1, 10),)},
        {"arrivals": (ArrivalSegment(math.inf, 10),)},
        {"tick_seconds": 0.0},
        {"horizon_seconds": HORIZON_SECONDS * 2},
        {"shop_seconds": math.inf},
    ],
)
def test_inputs_out_of_range_are_refused(wrong: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="out of range"):
        inputs(**wrong)


def test_nobody_at_all() -> None:
    result = forecast(inputs(rate_per_minute=60))
    assert result.fans == 0 and result.empty_at == 0
    assert result.first_wait is None and result.last_wait is None
