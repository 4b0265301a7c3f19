import itertools
import random

import pytest

from dashboard.fairness import (
    QuotedWait,
    RandomAdmission,
    count_inversions,
    coverage,
    kendall_tau,
    median_abs_error,
    percentiles,
    random_order_inversions,
)


def brute_force_inversions(values):
    return sum(1 for a, b in itertools.combinations(values, 2) if a > b)


def test_inversions_match_the_definition() -> None:
    rng = random.Random(7)
    for n in (0, 1, 2, 5, 40, 200):
        values = rng.sample(range(10_000), n)
        assert count_inversions(values) == brute_force_inversions(values)


def brute_force_random_inversions(admissions):
    """By the definition: a later admission with a lower place, committed before the run of
    an earlier one (the settled ids taken as never going down)."""
    found, settled = 0, 0
    for i, a in enumerate(admissions):
        settled = max(settled, a.settled_id, a.entry_id)
        found += sum(1 for b in admissions[i + 1 :] if b.place < a.place and b.entry_id <= settled)
    return found


def test_random_order_inversions_match_the_definition() -> None:
    rng = random.Random(11)
    for n in (0, 1, 2, 7, 60, 300):
        ids = list(range(1, n + 1))
        order = rng.sample(ids, n)  # the order admissions happened in
        settled, admissions = 0, []
        for entry_id in order:
            settled = max(settled, entry_id, settled + rng.randrange(0, 4))
            place = rng.randrange(1_000)
            admissions.append(RandomAdmission(place=place, entry_id=entry_id, settled_id=settled))
        assert random_order_inversions(admissions) == brute_force_random_inversions(admissions)


def test_a_newcomer_ahead_of_those_let_in_before_it_joined_is_no_inversion() -> None:
    # Entries 1-3 committed before the first run (settled 3); entry 4, with the lowest place,
    # joined after it and went in next: fair. Had it been committed before, it would count.
    fair = [RandomAdmission(20, 1, 3), RandomAdmission(30, 2, 3), RandomAdmission(5, 4, 4)]
    assert random_order_inversions(fair) == 0
    late = [RandomAdmission(20, 1, 4), RandomAdmission(30, 2, 4), RandomAdmission(5, 4, 4)]
    assert random_order_inversions(late) == 2


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
