from datetime import UTC, datetime

import pytest

from queueing.rules.eta import Throughput, configured_pace, estimate_wait, measure_throughput

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def test_the_interval_is_centred_on_position_over_rate() -> None:
    eta = estimate_wait(60, Throughput(lam=1.0, scv=1.0, measured=True))
    assert eta.p50 == pytest.approx(60)
    assert eta.p10 < eta.p50 < eta.p90
    assert eta.p90 - eta.p50 == pytest.approx(1.2816 * 60**0.5, rel=1e-3)


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


def test_before_enough_samples_the_configured_pace_is_assumed_poisson() -> None:
    pace = configured_pace(rate_per_minute=120, capacity=0, session_seconds=600)
    throughput = measure_throughput([(second(0), 3)], now=NOW, prior_lam=pace)
    assert throughput == Throughput(lam=2.0, scv=1.0, measured=False)


def test_a_capacity_bound_event_is_paced_by_sessions() -> None:
    assert configured_pace(rate_per_minute=600, capacity=10, session_seconds=100) == 0.1


def test_measured_throughput_of_a_steady_stream() -> None:
    counts = [(second(s), 1) for s in range(120)]  # one a second for two minutes
    throughput = measure_throughput(counts, now=NOW, prior_lam=None)
    assert throughput.measured
    assert throughput.lam == pytest.approx(1.0)
    assert throughput.scv < 0.2


def test_measured_throughput_of_bursts_has_high_variability() -> None:
    counts = [(second(s), 10) for s in range(0, 120, 10)]
    throughput = measure_throughput(counts, now=NOW, prior_lam=None)
    assert throughput.lam == pytest.approx(1.0, rel=0.1)
    assert throughput.scv > 5


def test_admissions_older_than_the_window_are_forgotten() -> None:
    counts = [(second(1000 + s), 5) for s in range(100)]
    assert measure_throughput(counts, now=NOW, prior_lam=None) is None
