import itertools
import random

import pytest

from dashboard.fairness import (
    QuotedWait,
    count_inversions,
    coverage,
    kendall_tau,
    median_abs_error,
    percentiles,
)


def brute_force_inversions(values):
    return sum(1 for a, b in itertools.combinations(values, 2) if a > b)


def test_inversions_match_the_definition() -> None:
    rng = random.Random(7)
    for n in (0, 1, 2, 5, 40, 200):
        values = rng.sample(range(10_000), n)
        assert count_inversions(values) == brute_force_inversions(values)


def test_kendall_tau_is_one_in_order_and_minus_one_reversed() -> None:
    assert kendall_tau(count_inversions([1, 2, 3, 4]), 4) == 1
    assert kendall_tau(count_inversions([4, 3, 2, 1]), 4) == -1
    assert kendall_tau(count_inversions([2, 1, 3, 4]), 4) == pytest.approx(1 - 2 / 6)
    assert kendall_tau(0, 1) is None


def test_coverage_and_error_of_quotes() -> None:
    waits = [
        QuotedWait(waited=100, p10=50, p50=90, p90=150),  # inside
        QuotedWait(waited=200, p10=50, p50=90, p90=150),  # outside
        QuotedWait(waited=60, p10=60, p50=70, p90=80),  # on the edge: inside
        QuotedWait(waited=10, p10=None, p50=None, p90=None),  # never quoted
    ]
    assert coverage(waits) == pytest.approx(2 / 3)
    assert median_abs_error(waits) == 10
    assert coverage([]) is None


def test_percentiles_by_nearest_rank() -> None:
    assert percentiles(list(range(1, 101))) == {"p50": 50, "p90": 90, "p99": 99}
    assert percentiles([]) == {}
