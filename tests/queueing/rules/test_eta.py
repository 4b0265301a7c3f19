import random
from datetime import UTC, datetime, timedelta

import pytest

from queueing.rules.eta import (
    MIN_DEPARTURES,
    MODEL_ERROR,
    SETTLING_SECONDS,
    TICK_SD,
    Z90,
    Throughput,
    configured_pace,
    estimate_wait,
    measure_throughput,
)

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def test_the_interval_is_centred_on_position_over_rate() -> None:
    eta = estimate_wait(60, Throughput(lam=1.0, scv=1.0, measured=True))
    assert eta.p50 == pytest.approx(60)
    assert eta.p10 < eta.p50 < eta.p90
    # The process's spread plus a tick's phase (rel_err 0: a pace known exactly).
    assert eta.p90 - eta.p50 == pytest.approx(Z90 * (60 + TICK_SD**2) ** 0.5, rel=1e-6)


def test_steadier_admission_gives_a_narrower_interval() -> None:
    bursty = estimate_wait(100, Throughput(lam=2.0, scv=4.0, measured=True))
    steady = estimate_wait(100, Throughput(lam=2.0, scv=0.1, measured=True))
    assert steady.p90 - steady.p10 < bursty.p90 - bursty.p10
    assert steady.p50 == bursty.p50


def test_no_estimate_without_any_pace() -> None:
    assert estimate_wait(5, None) is None
    assert configured_pace(rate_per_minute=0, capacity=0, session_seconds=600) is None


def second(offset: int) -> int:
    return int(NOW.timestamp()) - offset


def measure(admissions=(), departures=(), *, rate=0, capacity=0, session=120):
    return measure_throughput(
        admissions,
        departures=departures,
        now=NOW,
        rate_per_minute=rate,
        capacity=capacity,
        session_seconds=session,
    )


def test_a_rate_the_capacity_cannot_hold_back_is_the_pace_from_the_start() -> None:
    # 2 a second for 60 s sessions fill at most 120 of 500 places: the rate is exact.
    throughput = measure(rate=120, capacity=500, session=60)
    assert (throughput.lam, throughput.ranged) == (2.0, False)
    eta = estimate_wait(10, throughput)
    assert eta.p10 < 5.0 < eta.p90


def test_a_capacity_bound_sale_says_measuring_until_checkouts_are_measured() -> None:
    """Nothing measured: no estimate, rather than the settings' bound (every fan using the
    whole session: the first fans were told 105-279 s and waited 5)."""
    throughput = measure(rate=600, capacity=5, session=120)
    assert throughput.ranged and not throughput.measured
    assert throughput.lam == pytest.approx(5 / 120)  # the catalogue's "configured" pace
    assert estimate_wait(7, throughput) is None
    assert estimate_wait(7, measure(capacity=5, session=120)) is None
    # The first run's departures happened before anything was timed: not counted.
    few = [(second(s), 1, 5) for s in range(MIN_DEPARTURES)]
    assert estimate_wait(7, measure(departures=few, capacity=5)) is None
    enough = [(second(s), 1, 5) for s in range(MIN_DEPARTURES + 1)]
    assert estimate_wait(7, measure(departures=enough, capacity=5)) is not None


def test_after_a_prequeue_is_let_go_the_room_says_measuring_while_it_settles() -> None:
    """The pre-queue fills the shop at once and every page reloads: those seconds are not the
    sale's pace (in the surge rehearsal 10/s at 3 s, 3.6/s at 7 s, 16/s from 18 s)."""
    departures = [(second(s), 3, 5) for s in range(SETTLING_SECONDS)]
    started = datetime.fromtimestamp(second(SETTLING_SECONDS - 1), tz=UTC)
    settling = measure_throughput(
        [],
        departures=departures,
        now=NOW,
        rate_per_minute=0,
        capacity=5,
        session_seconds=120,
        prequeue_let_go_at=started,
    )
    assert estimate_wait(7, settling) is None
    # Without a pre-queue the same departures are quoted; and so are they once it settled.
    assert estimate_wait(7, measure(departures=departures, capacity=5)) is not None
    settled = measure_throughput(
        [],
        departures=departures,
        now=NOW,
        rate_per_minute=0,
        capacity=5,
        session_seconds=120,
        prequeue_let_go_at=started - timedelta(seconds=1),
    )
    assert estimate_wait(7, settled) is not None
    # A rate the capacity cannot hold back is known from the start, pre-queue or not.
    exact = measure_throughput(
        [],
        now=NOW,
        rate_per_minute=120,
        capacity=500,
        session_seconds=60,
        prequeue_let_go_at=NOW,
    )
    assert exact.lam == 2.0 and estimate_wait(7, exact) is not None


def test_a_capacity_is_the_pace_is_capacity_over_the_time_in_the_shop() -> None:
    # A full shop of 5, two leaving every second: 2 s in the shop, 2.5 fans a second.
    departures = [(second(s), 2, 5) for s in range(60)]
    throughput = measure(departures=departures, capacity=5)
    assert throughput.measured and not throughput.ranged
    assert throughput.lam == pytest.approx(2.0, rel=0.05)


def test_a_half_empty_shop_is_not_mistaken_for_a_slow_one() -> None:
    # Only 2 of 10 places taken, one leaving a second: 2 s each, so 10 places make 5 a second.
    departures = [(second(s), 1, 2) for s in range(60)]
    assert measure(departures=departures, capacity=10).lam == pytest.approx(5.0, rel=0.05)


def test_the_burst_that_fills_an_empty_shop_is_not_the_pace() -> None:
    """Admissions at the start: 40 at once into an empty shop, then 2 a second; the pace
    comes from departures, which the fill does not inflate."""
    admissions = [(second(30), 40)] + [(second(s), 2) for s in range(30)]
    departures = [(second(s), 2, 40) for s in range(28)]
    assert measure(admissions, departures, capacity=40).lam == pytest.approx(2.0, rel=0.1)


def test_a_shop_that_slows_down_is_followed_and_the_range_widens() -> None:
    steady = [(second(s), 4, 8) for s in range(15, 60)]
    slowed = [(second(s), 2, 8) for s in range(15)]
    before = measure(departures=[(second(s), 4, 8) for s in range(60)], capacity=8)
    after = measure(departures=steady + slowed, capacity=8)
    assert after.lam == pytest.approx(2.0, rel=0.1)  # the last 15 s, not the minute
    assert after.rel_err > before.rel_err


def halved(seconds_ago: int) -> list[tuple[int, int, int]]:
    """A full shop of 8 whose fans left 4 a second until ``seconds_ago``, 2 a second since."""
    return [(second(s), 4 if s >= seconds_ago else 2, 8) for s in range(60)]


def test_a_shop_that_changed_is_measured_from_the_change() -> None:
    """Half a minute after the shop halved its pace: the pace since then, known as well as
    half a minute of it is (not the minute's mix, nor a range widened by it)."""
    throughput = measure(departures=halved(30), capacity=8)
    assert throughput.lam == pytest.approx(2.0, rel=0.02)  # blending the windows: 2.19
    # Its sampling error (60 departures) and the model's floor: blending the windows, 0.37.
    assert throughput.rel_err == pytest.approx((1 / 60 + MODEL_ERROR**2) ** 0.5, rel=0.05)


def test_a_change_not_yet_sure_widens_the_range_before_it_moves_the_pace() -> None:
    """Four seconds into a halving the evidence is thin: the quote stays where it was (it
    would go up and down with every departure otherwise) but its range reaches toward it."""
    steady = measure(departures=[(second(s), 4, 8) for s in range(60)], capacity=8)
    suspect = measure(departures=halved(4), capacity=8)
    assert suspect.lam == pytest.approx(steady.lam, rel=0.05)
    quoted, before = estimate_wait(60, suspect), estimate_wait(60, steady)
    assert quoted.p50 == pytest.approx(before.p50, rel=0.05)
    assert quoted.p90 > before.p90 + 2.0  # blending the windows alone: 19.6 s, now 22 s


def test_a_steady_shop_is_not_taken_for_a_changed_one() -> None:
    """Departures of a steady shop vary by chance (Poisson, 3 a second): the change test
    must not restart the measurement on that, or quotes would jump."""
    rng = random.Random(17)

    def poisson(mean: float) -> int:
        count, total = 0, rng.expovariate(1.0)
        while total < mean:
            count, total = count + 1, total + rng.expovariate(1.0)
        return count

    paces = []
    for _ in range(40):
        departures = [(second(s), poisson(3.0), 6) for s in range(60)]
        paces.append(measure(departures=departures, capacity=6).lam)
    assert sum(abs(lam / 3.0 - 1) > 0.2 for lam in paces) <= 1


def test_the_rate_is_the_pace_when_it_is_slower_than_the_shop() -> None:
    departures = [(second(s), 2, 2) for s in range(60)]  # 1 s in the shop: 20/s for 20
    assert measure(departures=departures, rate=180, capacity=20).lam == pytest.approx(3.0)


def test_the_range_grows_with_the_uncertainty_of_the_pace() -> None:
    sure = estimate_wait(100, Throughput(lam=2.0, scv=0.3, measured=True, rel_err=0.0))
    unsure = estimate_wait(100, Throughput(lam=2.0, scv=0.3, measured=True, rel_err=0.2))
    assert unsure.p50 == sure.p50
    # Far back, the pace's error dominates: about ±1.28 × 20% of the mean.
    assert unsure.p90 - unsure.p50 == pytest.approx(Z90 * 50 * 0.2, rel=0.1)


def test_an_unlimited_sale_is_paced_by_what_was_admitted() -> None:
    admissions = [(second(s), 1) for s in range(120)]  # one a second for two minutes
    throughput = measure(admissions)
    assert throughput.measured
    assert throughput.lam == pytest.approx(1.0)
    assert throughput.scv < 0.2


def test_measured_throughput_of_bursts_has_high_variability() -> None:
    admissions = [(second(s), 10) for s in range(0, 120, 10)]
    throughput = measure(admissions)
    assert throughput.lam == pytest.approx(1.0, rel=0.1)
    assert throughput.scv > 5


def test_records_older_than_the_window_are_forgotten() -> None:
    assert measure([(second(1000 + s), 5) for s in range(100)]) is None
    old = [(second(1000 + s), 2, 5) for s in range(100)]
    assert measure(departures=old, capacity=5, session=100).ranged


def test_a_later_tier_is_quoted_what_the_tiers_before_it_leave() -> None:
    """A fan club (strict, first) admitted at ~0.86 a second out of 3: a general fan at
    position 30 waits 30 / 2.14 s, not 30 / 3 (the fan club keeps arriving ahead)."""
    departures = [(second(s), 3, 6) for s in range(60)]  # 2 s in the shop: 3 a second
    fan_club = [(second(s), 4) for s in range(0, 60, 5)]  # 48 in 56 s
    left = 3.0 - 48 / 56
    throughput = measure_throughput(
        [],
        departures=departures,
        tier_admissions={1: fan_club},
        groups=[[1], [2, 3]],
        now=NOW,
        rate_per_minute=0,
        capacity=6,
        session_seconds=120,
    )
    assert throughput.pace_for(1) == pytest.approx(3.0)
    assert throughput.pace_for(2) == throughput.pace_for(3) == pytest.approx(left)
    assert estimate_wait(30, throughput, 2).p50 == pytest.approx(30 / left)
    assert estimate_wait(30, throughput, 1).p50 == pytest.approx(10.0)


def test_a_young_sale_is_timed_to_the_moment_not_in_whole_seconds() -> None:
    """Runs at 0 s (the fill) and 1 s, asked at 1.5 s: 12 left in 1.5 s is 8 a second, not 12
    over "two seconds" (6 a second): early quotes were 1.9 times too long that way."""
    start = int(NOW.timestamp()) - 1
    departures = [(start, 0, 20), (start + 1, 12, 20)]
    now = datetime.fromtimestamp(start + 1.5, tz=UTC)
    throughput = measure_throughput(
        [], departures=departures, now=now, rate_per_minute=0, capacity=20, session_seconds=600
    )
    assert throughput.lam == pytest.approx(8.0)


def test_a_pace_measured_in_the_first_seconds_of_a_sale_is_quoted_wider() -> None:
    """The same departures a second, measured over 5 s or over a minute: the same pace, a
    wider range while the sale is young (the room is busiest then)."""
    young = measure(departures=[(second(s), 4, 8) for s in range(6)], capacity=8)
    settled = measure(departures=[(second(s), 4, 8) for s in range(61)], capacity=8)
    assert young.lam == pytest.approx(settled.lam, rel=0.01)
    assert young.rel_err > settled.rel_err + 0.2
    assert settled.rel_err < 0.15
