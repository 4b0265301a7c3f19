"""The waiting page says what the server says: waiting.js's ``waitKind``, ``statusKind`` and
``waitBound`` against queueing/rules/wording.py's and rules/eta.py's rules, for every
situation (the sentences themselves are the same catalog's: rules/wording.py js_strings)."""

from __future__ import annotations

import itertools

import pytest

from queueing.rules.eta import Eta, wait_bound
from queueing.rules.wording import status_kind, wait_kind
from tests.waiting_js import run_waiting_js

STATUSES = ("prequeue", "waiting")
STATES = ("prequeue", "open", "paused", "closed")
MODES = ("queue", "safety_net", "passthrough", "maintenance")


def test_the_page_chooses_the_wait_sentence_the_server_chooses() -> None:
    cases = list(
        itertools.product(STATUSES, STATES, MODES, (None, Eta(60, 120, 180)), (None, 900.0))
    )
    payload = [
        {
            "status": status,
            "state": state,
            "mode": mode,
            "eta": eta.as_dict() if eta else None,
            "bound": bound,
        }
        for status, state, mode, eta, bound in cases
    ]
    said = run_waiting_js(
        "return input.map((c) => rules.waitKind(c.status, c.state, c.mode, c.eta, c.bound));",
        payload,
    )
    expected = [
        wait_kind(status=status, state=state, mode=mode, eta=eta, bound_seconds=bound).value
        for status, state, mode, eta, bound in cases
    ]
    assert said == expected
    assert len(set(expected)) == 7  # every kind is reached


def test_the_page_chooses_the_first_line_the_server_chooses() -> None:
    cases = list(itertools.product(STATUSES, STATES, MODES, (None, 1, 2, 40)))
    said = run_waiting_js(
        "return input.map((c) => rules.statusKind(c[0], c[1], c[2], c[3]));",
        [list(case) for case in cases],
    )
    expected = [
        status_kind(status=status, state=state, mode=mode, position=position).value
        for status, state, mode, position in cases
    ]
    assert said == expected


@pytest.mark.parametrize(
    "limits",
    [
        {"rate": 0, "capacity": 5, "session": 600},
        {"rate": 30, "capacity": 60, "session": 600},
        {"rate": 6, "capacity": 100, "session": 60},  # the rate is the pace: no bound
        {"rate": 60, "capacity": 0, "session": 600},
        {"rate": 0, "capacity": 3, "session": 0},
        {"rate": 1, "capacity": 1, "session": 7200},
    ],
)
def test_the_page_bounds_a_wait_as_the_server_does(limits) -> None:
    positions = [0, 1, 2, 5, 6, 59, 61, 1234, 500_000]
    said = run_waiting_js(
        "return input.positions.map((p) => rules.waitBound(p, input.limits));",
        {"positions": positions, "limits": limits},
    )
    expected = [
        wait_bound(
            position,
            rate_per_minute=limits["rate"],
            capacity=limits["capacity"],
            session_seconds=limits["session"],
        )
        for position in positions
    ]
    assert said == pytest.approx(expected)
