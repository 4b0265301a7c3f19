"""Fairness and accuracy figures for the audit report. Pure: no I/O.

"Join order" is the order the rules assign, the order key: join order for fans who came after
the start, the published shuffle for the pre-queue cohort. An inversion is a pair of fans in
one tier where the one further back in that order was admitted first.

A line in random order (``Event.queue_order``) is judged by its own claim instead: every
admission took the lowest place among the entries committed before its run
(``random_order_inversions``). A newcomer may sort ahead of fans already let in, which is
not an inversion.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def count_inversions(values: Sequence[int]) -> int:
    """Pairs i < j with values[i] > values[j], by merge sort: O(n log n)."""
    items = list(values)
    if len(items) < 2:
        return 0
    middle = len(items) // 2
    left, right = items[:middle], items[middle:]
    inversions = count_inversions(left) + count_inversions(right)
    left.sort()
    right.sort()
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            i += 1
        else:
            inversions += len(left) - i
            j += 1
    return inversions


@dataclass(frozen=True)
class RandomAdmission:
    """One first admission of a random line's tier, in the trail's order."""

    place: int  # the place key recomputed from the revealed seed
    entry_id: int
    # Every entry up to this id was committed when the run picked (its ``settled_id``).
    settled_id: int


def random_order_inversions(admissions: Sequence[RandomAdmission]) -> int:
    """Pairs where a fan with a lower place, committed before an admission's run (id up to
    its ``settled_id``), was let in after it: O(n log n) with a Fenwick tree over the places.

    The settled ids are taken as never going down (a run that read its bound before a later
    run but got the lock after it could count a fan it could not see: an overcount, never a
    miss)."""
    by_id = sorted(range(len(admissions)), key=lambda i: admissions[i].entry_id)
    by_place = sorted(range(len(admissions)), key=lambda i: (admissions[i].place, i))
    rank = {i: r for r, i in enumerate(by_place)}
    tree = [0] * (len(admissions) + 1)

    def add(position: int, delta: int) -> None:
        position += 1
        while position < len(tree):
            tree[position] += delta
            position += position & -position

    def below(position: int) -> int:
        total = 0
        while position > 0:
            total += tree[position]
            position -= position & -position
        return total

    inversions, pointer, settled = 0, 0, 0
    for i, admission in enumerate(admissions):
        settled = max(settled, admission.settled_id, admission.entry_id)
        while pointer < len(by_id) and admissions[by_id[pointer]].entry_id <= settled:
            add(rank[by_id[pointer]], 1)
            pointer += 1
        add(rank[i], -1)
        inversions += below(rank[i])
    return inversions


def kendall_tau(inversions: int, n: int) -> float | None:
    """Kendall's tau between two orders of n items (no ties), from their discordant pairs."""
    pairs = n * (n - 1) // 2
    if pairs == 0:
        return None
    return 1 - 2 * inversions / pairs


@dataclass(frozen=True)
class QuotedWait:
    waited: float  # seconds from join to admission
    p10: float | None
    p50: float | None
    p90: float | None


def coverage(waits: Sequence[QuotedWait]) -> float | None:
    quoted = [w for w in waits if w.p10 is not None and w.p90 is not None]
    if not quoted:
        return None
    return sum(1 for w in quoted if w.p10 <= w.waited <= w.p90) / len(quoted)


def median_abs_error(waits: Sequence[QuotedWait]) -> float | None:
    errors = [abs(w.waited - w.p50) for w in waits if w.p50 is not None]
    return statistics.median(errors) if errors else None


def percentiles(values: Sequence[float], points: Sequence[int] = (50, 90, 99)) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    result = {}
    for point in points:
        # Nearest rank: the smallest value with at least point% of values at or below it.
        rank = max(1, -(-point * len(ordered) // 100))
        result[f"p{point}"] = ordered[rank - 1]
    return result
