"""A draw's outcome before it happens (queueing/rules/draw_forecast.py), on draws worked out by
hand."""

from __future__ import annotations

from typing import Any

import pytest

from queueing.rules.draw_forecast import MAX_ROUNDS, DrawForecastInputs, draw_forecast


def inputs(**fields: Any) -> DrawForecastInputs:
    base: dict[str, Any] = {
        "registrations": 10_000,
        "confirmed_share": 0.8,
        "winners": 1_000,
        "waitlist": 500,
        "use_share": 0.5,
        "invitation_hours": 48,
    }
    return DrawForecastInputs(**(base | fields))


def test_the_draw_splits_the_confirmed_into_winners_waitlist_and_lost() -> None:
    result = draw_forecast(inputs())
    assert (result.confirmed, result.places, result.waitlisted, result.lost) == (
        8_000,
        1_000,
        500,
        6_500,
    )
    assert result.first_round_in == 500


def test_each_round_invites_the_last_ones_lapses_until_the_places_are_filled() -> None:
    # 1,000 invited, 100 lapse; 100 invited, 10 lapse; 10, 1 lapses; 1, 0.1: filled.
    result = draw_forecast(inputs(use_share=0.9))
    assert [round(r.invited, 6) for r in result.rounds] == [1_000, 100, 10, 1]
    assert [r.after_hours for r in result.rounds] == [0, 48, 96, 144]
    assert result.first_round_in == pytest.approx(900)
    assert result.rounds_to_fill == 3 and result.filled and result.unfilled == 0
    assert result.waitlist_invited == pytest.approx(111)
    assert result.settled_after_hours == 4 * 48


def test_everyone_using_their_invitation_fills_the_places_at_the_draw() -> None:
    result = draw_forecast(inputs(use_share=1))
    assert result.rounds_to_fill == 0 and result.used == 1_000
    assert result.waitlist_invited == 0 and result.settled_after_hours == 48


def test_a_waitlist_that_runs_dry_leaves_places_empty() -> None:
    # Half lapse each round: 500 lapse, the 100 waitlisted invited, 50 of them lapse.
    result = draw_forecast(inputs(waitlist=100, use_share=0.5))
    assert [r.invited for r in result.rounds] == [1_000, 100]
    assert result.rounds_to_fill is None and not result.filled
    assert result.used == 550 and result.unfilled == 450
    assert result.waitlist_invited == 100


def test_fewer_confirmed_than_winners_all_win_and_nobody_waits() -> None:
    result = draw_forecast(inputs(registrations=500, confirmed_share=1, use_share=1))
    assert (result.places, result.waitlisted, result.lost) == (500, 0, 0)
    assert result.first_round_in == 500 and result.rounds_to_fill == 0


def test_nobody_registering_needs_no_round() -> None:
    result = draw_forecast(inputs(registrations=0))
    assert result.rounds == () and result.rounds_to_fill == 0 and result.used == 0


def test_nobody_using_an_invitation_ends_with_the_waitlist_and_the_rounds_are_bounded() -> None:
    dry = draw_forecast(inputs(use_share=0))
    assert [r.invited for r in dry.rounds] == [1_000, 500]
    assert dry.rounds_to_fill is None and dry.unfilled == 1_000
    long = draw_forecast(
        inputs(
            registrations=10_000_001, confirmed_share=1, winners=1, waitlist=10_000_000, use_share=0
        )
    )
    assert len(long.rounds) == MAX_ROUNDS and not long.filled


@pytest.mark.parametrize(
    "fields",
    [{"registrations": -1}, {"confirmed_share": 1.5}, {"use_share": -0.1}, {"invitation_hours": 0}],
)
def test_inputs_out_of_range_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        draw_forecast(inputs(**fields))
