"""A rehearsal fan is shown what the waiting page shows: its position from the tick's
checkpoints and its wait from the tick's throughput (rehearsal/page.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from queueing.rules.eta import Throughput, estimate_wait
from rehearsal.page import MessageReader, place_from_snapshot, shown_in_tick

SNAPSHOT = {
    "type": "snapshot",
    "status": "waiting",
    "tier_id": 2,
    "order_key": 50,
    "tiers": [{"id": 1, "share": 0}, {"id": 2, "share": 0}],
}


def tick(**changes: Any) -> dict[str, Any]:
    return {
        "type": "tick",
        "state": "open",
        "tiers": [
            {"id": 1, "count": 3, "checkpoints": [[0, 10], [1, 11], [2, 12]]},
            {"id": 2, "count": 10, "checkpoints": [[0, 40], [1, 45], [2, 50], [9, 90]]},
        ],
        "throughput": {"lam": 2.0, "scv": 1.0, "err": 0.1, "ranged": False, "tiers": {}},
    } | changes


def test_the_fan_is_placed_behind_the_strict_tier_ahead_and_quoted_as_the_server_would() -> None:
    place = place_from_snapshot(SNAPSHOT)
    assert place is not None
    shown = shown_in_tick(place, tick())
    assert shown is not None
    # The fan club's 3, then 2 ahead in the fan's own tier.
    assert shown.position == 6
    assert shown.eta == estimate_wait(6, Throughput(lam=2.0, scv=1.0, measured=True, rel_err=0.1))


def test_a_later_tier_is_quoted_at_what_is_left_of_the_pace() -> None:
    place = place_from_snapshot(SNAPSHOT)
    assert place is not None
    throughput = {"lam": 2.0, "scv": 1.0, "err": 0.0, "ranged": False, "tiers": {"2": 1.0}}
    shown = shown_in_tick(place, tick(throughput=throughput))
    assert shown is not None and shown.eta is not None
    assert shown.eta.p50 == pytest.approx(6.0)


def test_between_checkpoints_the_rank_is_interpolated_as_the_page_does() -> None:
    place = place_from_snapshot(SNAPSHOT | {"order_key": 70})
    assert place is not None
    shown = shown_in_tick(place, tick())
    assert shown is not None
    assert shown.position == 3 + 6 + 1  # rank 2 + (70 - 50) / (90 - 50) * 7, rounded


def test_paused_shows_the_place_but_no_wait() -> None:
    place = place_from_snapshot(SNAPSHOT)
    assert place is not None
    shown = shown_in_tick(place, tick(state="paused"))
    assert shown is not None and shown.position == 6 and shown.eta is None


def test_unmeasured_pace_shows_no_wait() -> None:
    place = place_from_snapshot(SNAPSHOT)
    assert place is not None
    ranged = {"lam": 0.1, "scv": 1.0, "err": 0.0, "ranged": True, "tiers": {}}
    for throughput in (None, ranged):
        shown = shown_in_tick(place, tick(throughput=throughput))
        assert shown is not None and shown.eta is None


@pytest.mark.parametrize("order_key", [30, 95, 44])
def test_a_fan_the_tick_does_not_place_asks_the_server(order_key: int) -> None:
    # Before the line's first (let in), past its last (not in this tick yet), or between
    # two neighbouring ranks (not in this tier's line).
    place = place_from_snapshot(SNAPSHOT | {"order_key": order_key})
    assert place is not None
    assert shown_in_tick(place, tick()) is None


def test_a_snapshot_without_a_place_gives_none() -> None:
    assert place_from_snapshot(SNAPSHOT | {"order_key": None}) is None


def test_the_same_tick_is_parsed_once_for_every_fan() -> None:
    reader = MessageReader()
    text = json.dumps(tick())
    first = reader.read(text)
    assert reader.read(str(text)) is first
    assert reader.read(json.dumps(tick(state="paused"))) is not first
    snapshot = json.dumps(SNAPSHOT)
    assert reader.read(snapshot) is not reader.read(snapshot)  # personal: never shared
