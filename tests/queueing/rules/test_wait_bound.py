"""The most a wait can be while a capacity-bound pace is still measured (rules/eta.py
``wait_bound``): from the settings alone, a bound that the slowest shop the settings allow
keeps, and None where the settings bound nothing."""

import pytest

from queueing.rules.eta import SESSION_TURNOVER_SECONDS, configured_pace, wait_bound


def test_fans_go_in_by_waves_of_the_capacity_each_at_most_a_session() -> None:
    # Five places, ten-minute sessions, no rate: the 5th fan goes in when the first place frees
    # (within a session), the 6th within two.
    session = 600 + SESSION_TURNOVER_SECONDS
    assert wait_bound(1, rate_per_minute=0, capacity=5, session_seconds=600) == session
    assert wait_bound(5, rate_per_minute=0, capacity=5, session_seconds=600) == session
    assert wait_bound(6, rate_per_minute=0, capacity=5, session_seconds=600) == 2 * session


def test_a_rate_adds_the_time_it_takes_to_let_a_wave_in() -> None:
    # 60 places at 30 a minute: a wave of 60 takes two minutes to let in.
    bound = wait_bound(61, rate_per_minute=30, capacity=60, session_seconds=600)
    assert bound == 2 * (600 + SESSION_TURNOVER_SECONDS + 120)


@pytest.mark.parametrize("position", [1, 7, 100, 5000])
def test_the_bound_is_never_below_the_slowest_pace_the_settings_allow(position) -> None:
    limits = {"rate_per_minute": 30, "capacity": 20, "session_seconds": 900}
    slowest = configured_pace(**limits)
    assert slowest is not None
    bound = wait_bound(position, **limits)
    assert bound is not None and bound >= position / slowest


@pytest.mark.parametrize(
    "limits",
    [
        # The rate cannot fill the shop: the rate is the pace, quoted as an estimate.
        {"rate_per_minute": 6, "capacity": 100, "session_seconds": 60},
        {"rate_per_minute": 60, "capacity": 0, "session_seconds": 600},  # no capacity
        {"rate_per_minute": 0, "capacity": 5, "session_seconds": 0},  # no session
    ],
)
def test_no_bound_where_the_settings_bound_nothing(limits) -> None:
    assert wait_bound(10, **limits) is None


def test_no_bound_without_a_place() -> None:
    assert wait_bound(0, rate_per_minute=0, capacity=5, session_seconds=600) is None
