"""How often a page is sent the tick by its distance from the front (queueing/rules/tick_bands.py),
and the sockets' keep-alive pace (queueing/rules/layout.py)."""

from __future__ import annotations

import random

import pytest

from queueing.rules.layout import keepalive_seconds
from queueing.rules.tick_bands import (
    BACKLOG_MIN_PAGES,
    FAR_SECONDS,
    NEAR_SECONDS,
    backlogged,
    far_back_from,
    prequeue_tick_spacing,
    tick_due,
    tick_spacing,
)

FRONT = 10_000


def test_the_front_band_gets_every_tick_and_pages_behind_it_fewer() -> None:
    spacing = lambda position: tick_spacing(position, front=FRONT, fans_per_second=None)  # noqa: E731
    assert spacing(1) == spacing(FRONT) == 0.0
    assert spacing(FRONT + 1) == spacing(10 * FRONT) == NEAR_SECONDS
    assert spacing(10 * FRONT + 1) == spacing(10**8) == FAR_SECONDS == 10.0
    # Nobody's place is unknown to the tick for long: it asks the server, and gets every tick.
    assert spacing(None) == 0.0


def test_overload_stretches_the_bands_behind_the_front_to_at_most_30_s() -> None:
    for position in (1, FRONT):
        assert tick_spacing(position, front=FRONT, fans_per_second=None, overloaded=True) == 0.0
    near = tick_spacing(2 * FRONT, front=FRONT, fans_per_second=None, overloaded=True)
    far = tick_spacing(10**7, front=FRONT, fans_per_second=None, overloaded=True)
    assert (near, far) == (15.0, 30.0)
    assert prequeue_tick_spacing() == FAR_SECONDS
    assert prequeue_tick_spacing(overloaded=True) == 30.0


def test_a_fast_line_never_carries_a_page_into_the_front_between_two_of_its_ticks() -> None:
    # 500 fans a second (a full admission batch every tick): 2,000 places behind the front
    # band is 4 s away, so the page is sent a tick at least every 4 s, not 5.
    assert tick_spacing(FRONT + 2_000, front=FRONT, fans_per_second=500.0) == 4.0
    assert tick_spacing(FRONT + 100, front=FRONT, fans_per_second=500.0) == 0.2
    # A slow line changes nothing.
    assert tick_spacing(10**6, front=FRONT, fans_per_second=0.5) == FAR_SECONDS


@pytest.mark.parametrize("position", [50_000, 5_000_000])
@pytest.mark.parametrize("overloaded", [False, True])
def test_a_far_back_page_sees_ticks_no_further_apart_than_its_band(
    position: int, overloaded: bool
) -> None:
    """Ticks arriving about once a second (0.9-1.3 s apart, as the beat's are measured), the
    page sent the tick whenever the next one would come too late."""
    spacing = tick_spacing(position, front=FRONT, fans_per_second=None, overloaded=overloaded)
    rng = random.Random(position)
    now, sent, gaps, seen, recent = 0.0, 0.0, [], 0, [1.0]
    for _ in range(600):
        gap = rng.uniform(0.9, 1.3)
        now += gap
        recent = [*recent[-4:], gap]
        if tick_due(since_last=now - sent, spacing=spacing, tick_gap=max(recent)):
            gaps.append(now - sent)
            sent, seen = now, seen + 1
    assert max(gaps) <= spacing
    # ... and not much closer: a page 10 s from the front gets a tick about every 9 s.
    assert sum(gaps) / len(gaps) >= spacing - 2 * 1.3


def test_every_tick_is_due_to_a_page_in_the_front_band() -> None:
    for since_last in (0.0, 0.5, 1.0, 30.0):
        assert tick_due(since_last=since_last, spacing=0.0, tick_gap=0.0)


def test_the_overload_signal_is_a_share_of_pages_still_sending_not_a_few_slow_phones() -> None:
    assert not backlogged(behind=BACKLOG_MIN_PAGES, pages=BACKLOG_MIN_PAGES)
    assert not backlogged(behind=400, pages=10_000)
    assert backlogged(behind=600, pages=10_000)
    assert backlogged(behind=BACKLOG_MIN_PAGES + 1, pages=200)


def test_the_keepalive_comes_a_third_of_the_heartbeat_apart_within_1_to_30_s() -> None:
    assert keepalive_seconds(60) == 20.0  # the default heartbeat: 4 times fewer writes than 5 s
    assert keepalive_seconds(10) == pytest.approx(3.33, abs=0.01)
    assert keepalive_seconds(3600) == 30.0
    for heartbeat in range(10, 3601, 7):
        # Two refreshes in a row may fail and the fan is still not away.
        assert 3 * keepalive_seconds(heartbeat) <= heartbeat


@pytest.mark.parametrize("fans_per_second", [None, 0.5, 100.0, 500.0, 20_000.0])
@pytest.mark.parametrize("overloaded", [False, True])
def test_past_the_far_back_position_the_spacing_no_longer_depends_on_it(
    fans_per_second: float | None, overloaded: bool
) -> None:
    """What lets a web process place most pages with one comparison."""
    far = far_back_from(front=FRONT, fans_per_second=fans_per_second, overloaded=overloaded)
    spacings = {
        tick_spacing(position, front=FRONT, fans_per_second=fans_per_second, overloaded=overloaded)
        for position in (far + 1, far + 2, 2 * far, 10**9)
    }
    assert spacings == {FAR_SECONDS * (3 if overloaded else 1)}
