"""What a web process reads of a tick (queueing/live/tick_view.py): a page's spacing is the
rules' for its position, however the process places it."""

from __future__ import annotations

import json
import random

import pytest

from queueing.live.tick_view import Place, TickView
from queueing.live.ticks import CHECKPOINT_RANKS
from queueing.rules.layout import EventLayout, TierLayout, position_in_line, rank_from_checkpoints
from queueing.rules.tick_bands import tick_spacing

FRONT = 1_000
# Two weighted tiers after a strict one: positions count the others as admission serves them.
LAYOUT = EventLayout(
    event_id=1,
    slug="x",
    heartbeat_seconds=60,
    pace=None,
    tiers=(
        TierLayout(id=1, priority=0, share=0),
        TierLayout(id=2, priority=10, share=3),
        TierLayout(id=3, priority=10, share=1),
    ),
)
COUNTS = {1: 2_000, 2: 600_000, 3: 300_000}


def _key(tier_id: int, rank: int) -> int:
    return tier_id * 10**8 + 3 * rank  # every third key: fans who left between them


def _tick(lam: float | None) -> str:
    tiers = []
    for tier_id, count in COUNTS.items():
        ranks = [r for r in CHECKPOINT_RANKS if r < count] + [count - 1]
        tiers.append(
            {"id": tier_id, "count": count, "checkpoints": [[r, _key(tier_id, r)] for r in ranks]}
        )
    throughput = None if lam is None else {"lam": lam, "scv": 1, "err": 0, "ranged": False}
    return json.dumps(
        {"type": "tick", "state": "open", "mode": "queue", "tiers": tiers, "throughput": throughput}
    )


def _by_the_rules(tick: dict, place: Place, *, lam: float | None, overloaded: bool) -> float:
    tier = next(t for t in tick["tiers"] if t["id"] == place.tier_id)
    checkpoints = [tuple(c) for c in tier["checkpoints"]]
    rank = rank_from_checkpoints(checkpoints, place.order_key)
    position = None
    if rank is not None:
        counts = [COUNTS[t.id] for t in LAYOUT.tiers]
        position = position_in_line(
            LAYOUT, tier_id=place.tier_id, rank_in_tier=rank, tier_counts=counts
        )
    return tick_spacing(position, front=FRONT, fans_per_second=lam, overloaded=overloaded)


@pytest.mark.parametrize("lam", [None, 50.0, 2_000.0])
@pytest.mark.parametrize("overloaded", [False, True])
def test_a_pages_spacing_is_the_rules_for_its_position(lam: float | None, overloaded: bool) -> None:
    text = _tick(lam)
    view = TickView.parse(text)
    assert view is not None
    tick = json.loads(text)
    rng = random.Random(7)
    for _ in range(3_000):
        tier_id = rng.choice(list(COUNTS))
        # Anywhere in the tier, now and then a key between fans or past the last one.
        key = _key(tier_id, rng.randrange(COUNTS[tier_id])) + rng.choice([0, 0, 0, 1])
        place = Place(layout=LAYOUT, tier_id=tier_id, order_key=key)
        assert view.spacing(place, front=FRONT, overloaded=overloaded) == _by_the_rules(
            tick, place, lam=lam, overloaded=overloaded
        ), place


def test_a_text_that_is_not_a_tick_is_not_read() -> None:
    assert TickView.parse("t1") is None
    assert TickView.parse(json.dumps({"type": "tick"})) is None
