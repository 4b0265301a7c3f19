"""The staff preview's simulation (queueing/rules/forecast.py), on lines worked out by hand."""

from __future__ import annotations

import time

import pytest

from queueing.rules.forecast import ArrivalSegment, ForecastInputs, forecast


def inputs(**fields) -> ForecastInputs:
    base = {
        "capacity": 0,
        "rate_per_minute": 0,
        "session_seconds": 600,
        "shop_seconds": 120.0,
        "arrivals": (),
    }
    return ForecastInputs(**(base | fields))


def test_a_paced_line_lets_in_one_a_second() -> None:
    """120 in the pre-queue, 60 a minute: the first goes at once (a second's credit), the
    last about two minutes later, and the line is empty then."""
    result = forecast(inputs(rate_per_minute=60, prequeue_fans=120))
    assert result.first_wait == pytest.approx(0.0, abs=1.0)
    assert result.last_wait == pytest.approx(119, abs=2)
    assert result.median_wait == pytest.approx(59, abs=2)
    assert result.empty_at == pytest.approx(120, abs=2)
    assert result.peak_line == 120


def test_a_capacity_bound_line_moves_at_capacity_over_the_time_in_the_shop() -> None:
    """10 places, 20 s in the shop: 0.5 a second once full. 1,000 at once: the last waits
    about (1,000 - 10) / 0.5 s."""
    result = forecast(inputs(capacity=10, shop_seconds=20.0, prequeue_fans=1000))
    assert result.last_wait == pytest.approx(990 / 0.5, rel=0.03)


def test_arrivals_slower_than_the_pace_never_wait_long() -> None:
    result = forecast(
        inputs(rate_per_minute=600, arrivals=(ArrivalSegment(minutes=10, fans=3000),))
    )
    assert result.last_wait < 2
    assert result.empty_at == pytest.approx(600, abs=2)


def test_a_line_that_grows_faster_than_it_moves() -> None:
    """4 a second arrive for 40 s, 2 a second go in: 80 left at 40 s, the last waits 40 s."""
    result = forecast(
        inputs(capacity=5, shop_seconds=2.5, arrivals=(ArrivalSegment(minutes=40 / 60, fans=160),))
    )
    assert result.last_wait == pytest.approx(40, rel=0.1)
    assert result.peak_line == pytest.approx(80, rel=0.1)


def test_those_who_give_up_take_no_place() -> None:
    full = forecast(inputs(rate_per_minute=60, prequeue_fans=100))
    fewer = forecast(inputs(rate_per_minute=60, prequeue_fans=100, abandon_share=0.5))
    assert fewer.fans == 50
    assert fewer.last_wait == pytest.approx(full.last_wait / 2, abs=2)


def test_a_line_that_never_empties_within_the_horizon() -> None:
    result = forecast(inputs(capacity=1, shop_seconds=600.0, prequeue_fans=100_000))
    assert result.empty_at is None
    assert result.last_wait is None
    assert len(result.samples) <= 241


def test_fifty_thousand_in_ten_minutes_is_quick() -> None:
    started = time.perf_counter()
    result = forecast(
        inputs(
            capacity=2000,
            rate_per_minute=3000,
            shop_seconds=300.0,
            arrivals=(ArrivalSegment(minutes=10, fans=50_000),),
        )
    )
    assert result.empty_at is not None and result.last_wait is not None
    # Not a benchmark: a guard that the preview stays a page view, not a batch job.
    assert time.perf_counter() - started < 5
