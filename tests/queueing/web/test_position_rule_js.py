"""The waiting page's script places the fan by the server's rule.

queueing/static/queueing/waiting.js works out a fan's position on the client from each tick;
queueing/rules/layout.py (``position_in_line``) is the reference. Both are run here on the
same lines, many of them generated (strict and weighted tiers mixed, empty tiers, the fan
anywhere), and must agree exactly. The script runs in Node, once for all the lines.
"""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from queueing.rules.layout import (
    EventLayout,
    TierLayout,
    position_in_line,
    rank_from_checkpoints,
    service_groups,
)
from tests.waiting_js import run_waiting_js

# For each case: the tiers' counts by id, then the script's own rule.
POSITIONS = r"""
if (typeof rules.positionInLine !== "function") throw new Error("no positionInLine exported");
return input.map((c) => {
  const counts = {};
  c.tiers.forEach((t, i) => { counts[t.id] = c.counts[i]; });
  return rules.positionInLine(c.tiers, c.tier_id, c.rank, counts);
});
"""


def line(tiers, *, tier_id, rank, counts):
    """A case: ``tiers`` as (id, priority, share), put in service order (priority, id)."""
    ordered = sorted(tiers, key=lambda t: (t[1], t[0]))
    by_id = {t[0]: count for t, count in zip(tiers, counts, strict=True)}
    return {
        "tiers": [{"id": i, "priority": p, "share": s} for i, p, s in ordered],
        "counts": [by_id[i] for i, _, _ in ordered],
        "tier_id": tier_id,
        "rank": rank,
    }


EXPLICIT = {
    "single strict tier": line([(1, 10, 0)], tier_id=1, rank=4, counts=[9]),
    "single weighted tier": line([(1, 10, 3)], tier_id=1, rank=4, counts=[9]),
    "single tier, first": line([(1, 10, 0)], tier_id=1, rank=0, counts=[1]),
    "weighted only, heavier tier": line(
        [(1, 10, 3), (2, 20, 1)], tier_id=1, rank=7, counts=[20, 20]
    ),
    "weighted only, lighter tier": line(
        [(1, 10, 3), (2, 20, 1)], tier_id=2, rank=7, counts=[20, 20]
    ),
    "weighted only, other tier runs out": line(
        [(1, 10, 1), (2, 20, 5), (3, 30, 2)], tier_id=1, rank=6, counts=[10, 4, 50]
    ),
    "weighted only, uneven shares round down": line(
        [(1, 10, 3), (2, 20, 2), (3, 30, 7)], tier_id=2, rank=5, counts=[100, 100, 100]
    ),
    "strict then weighted, in the weighted group": line(
        [(1, 10, 0), (2, 20, 2), (3, 30, 1)], tier_id=3, rank=3, counts=[5, 40, 40]
    ),
    "strict then weighted, in the strict tier": line(
        [(1, 10, 0), (2, 20, 2), (3, 30, 1)], tier_id=1, rank=3, counts=[5, 40, 40]
    ),
    "weighted then strict, in the strict tier": line(
        [(1, 10, 2), (2, 20, 1), (3, 30, 0)], tier_id=3, rank=2, counts=[7, 11, 5]
    ),
    "weighted then strict, in the weighted group": line(
        [(1, 10, 2), (2, 20, 1), (3, 30, 0)], tier_id=2, rank=6, counts=[7, 11, 5]
    ),
    "strict between two weighted groups": line(
        [(1, 10, 1), (2, 20, 1), (3, 30, 0), (4, 40, 4), (5, 50, 1)],
        tier_id=5,
        rank=9,
        counts=[3, 4, 6, 100, 12],
    ),
    "empty tiers ahead and alongside": line(
        [(1, 10, 0), (2, 20, 3), (3, 30, 1), (4, 40, 2)], tier_id=3, rank=5, counts=[0, 0, 6, 0]
    ),
    "empty tiers everywhere but mine": line(
        [(1, 10, 0), (2, 20, 0), (3, 30, 0)], tier_id=2, rank=0, counts=[0, 1, 0]
    ),
    "same priority, ordered by id": line(
        [(9, 10, 0), (4, 10, 2), (6, 10, 1)], tier_id=6, rank=4, counts=[3, 8, 8]
    ),
}


def generated(seed=20_240_611, n=3000):
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        size = rng.randint(1, 5)
        ids = rng.sample(range(1, 60), size)
        tiers = []
        for tier_id in ids:
            strict = rng.random() < 0.4
            share = (
                0 if strict else rng.choice([1, 1, 2, 3, rng.randint(1, 10), rng.randint(1, 1000)])
            )
            tiers.append((tier_id, rng.randint(0, 4) * 10, share))
        counts = [rng.choice([0, 0, rng.randint(0, 20), rng.randint(0, 1_000_000)]) for _ in ids]
        mine = rng.randrange(size)
        counts[mine] = max(counts[mine], 1)
        rank = rng.choice([0, counts[mine] - 1, rng.randrange(counts[mine])])
        cases.append(line(tiers, tier_id=ids[mine], rank=rank, counts=counts))
    return cases


GENERATED = generated()


def layout_of(case):
    tiers = tuple(
        TierLayout(id=t["id"], priority=t["priority"], share=t["share"]) for t in case["tiers"]
    )
    return EventLayout(event_id=1, slug="x", heartbeat_seconds=60, pace=None, tiers=tiers)


def python_position(case):
    return position_in_line(
        layout_of(case),
        tier_id=case["tier_id"],
        rank_in_tier=case["rank"],
        tier_counts=case["counts"],
    )


@pytest.fixture(scope="module")
def js_answers():
    """The script's answers for the explicit cases (by name) and the generated ones (a list)."""
    names = list(EXPLICIT)
    cases = [EXPLICIT[name] for name in names] + GENERATED
    answers = run_waiting_js(POSITIONS, cases)
    assert len(answers) == len(cases)
    return dict(zip(names, answers, strict=False)), answers[len(names) :]


@pytest.mark.parametrize("name", list(EXPLICIT))
def test_the_script_agrees_on(name, js_answers):
    assert js_answers[0][name] == python_position(EXPLICIT[name]), EXPLICIT[name]


def test_the_script_agrees_on_generated_lines(js_answers):
    disagreements = [
        (case, answer, python_position(case))
        for case, answer in zip(GENERATED, js_answers[1], strict=True)
        if answer != python_position(case)
    ]
    assert not disagreements, (
        f"{len(disagreements)} of {len(GENERATED)} disagree; first (case, js, python): "
        f"{disagreements[0]}"
    )


def test_the_generated_lines_cover_every_mix():
    def kinds(case):
        shares = [t["share"] for t in case["tiers"]]
        groups = service_groups(layout_of(case).tiers)
        group = next(g for g in groups if case["tier_id"] in (t.id for t in g))
        return {
            "single tier": len(shares) == 1,
            "weighted only": len(shares) > 1 and all(shares),
            "strict then weighted": any(not a and b for a, b in pairwise(shares)),
            "weighted then strict": any(a and not b for a, b in pairwise(shares)),
            "fan in a weighted group": len(group) > 1,
            "fan in a strict tier": not group[0].share,
            "empty tier": 0 in case["counts"],
            "fan not first": case["rank"] > 0,
        }

    seen = dict.fromkeys(kinds(GENERATED[0]), 0)
    for case in GENERATED:
        for kind, present in kinds(case).items():
            seen[kind] += bool(present)
    assert all(count >= 50 for count in seen.values()), seen


# The page's place in its tier from a tick's checkpoints, against the rule the server places
# a poll with from a snapshot of the line (rules/layout.py rank_from_checkpoints).
RANKS = r"""
if (typeof rules.rankIn !== "function") throw new Error("no rankIn exported");
return input.map((c) => rules.rankIn(c.checkpoints, c.key));
"""


def sketches(seed=18, n=400):
    rng = random.Random(seed)
    cases = []
    for _ in range(n):
        keys = sorted(rng.sample(range(1, 10**7), rng.randint(1, 300)))
        ranks = sorted({0, len(keys) - 1, *rng.sample(range(len(keys)), min(len(keys), 40))})
        checkpoints = [[r, keys[r]] for r in ranks]
        probes = [rng.choice(keys), rng.randint(0, 10**7 + 5), keys[0] - 1, keys[-1] + 1]
        cases += [{"checkpoints": checkpoints, "key": key} for key in probes]
    cases.append({"checkpoints": [], "key": 5})
    cases.append({"checkpoints": [[0, 0], [3, 6]], "key": 3})  # a half: rounded up
    return cases


def test_the_script_places_itself_between_checkpoints_as_the_server_does():
    cases = sketches()
    answers = run_waiting_js(RANKS, cases)
    python = [
        rank_from_checkpoints([tuple(c) for c in case["checkpoints"]], case["key"])
        for case in cases
    ]
    disagreements = [
        (case, js, py) for case, js, py in zip(cases, answers, python, strict=True) if js != py
    ]
    assert not disagreements, disagreements[:3]
    assert sum(answer is None for answer in answers) > 100  # the cases it cannot place, too
