"""The waiting page quotes as the server does: waiting.js's ``estimate`` against
queueing/rules/eta.py's ``estimate_wait`` on the same paces, measured and ranged."""

from __future__ import annotations

import pytest

from queueing.rules.eta import Throughput, estimate_wait
from tests.waiting_js import run_waiting_js

ESTIMATES = r"""
return input.map((c) => rules.estimate(c.position, c.throughput, c.tier));
"""

PACES = [
    Throughput(lam=3.0, scv=0.5, measured=True, rel_err=0.1, tier_lams=((7, 2.2),)),
    Throughput(lam=2.5, scv=0.4, measured=True, rel_err=0.12),
    Throughput(lam=0.3, scv=1.0, measured=False, rel_err=0.1),
    Throughput(lam=0.04, scv=1.0, measured=False, ranged=True),
    Throughput(lam=50.0, scv=0.05, measured=True, rel_err=0.3),
]


def test_the_page_quotes_what_the_server_quotes() -> None:
    cases = [
        (position, pace, tier)
        for position in (1, 2, 7, 40, 1234, 500_000)
        for pace in PACES
        for tier in (7, 8)
    ]
    payload = [
        {
            "position": position,
            "tier": tier,
            "throughput": {
                "lam": pace.lam,
                "scv": pace.scv,
                "err": pace.rel_err,
                "ranged": pace.ranged,
                "tiers": {str(t): lam for t, lam in pace.tier_lams},
            },
        }
        for position, pace, tier in cases
    ]
    answers = run_waiting_js(ESTIMATES, payload)
    for (position, pace, tier), answer in zip(cases, answers, strict=True):
        eta = estimate_wait(position, pace, tier)
        if eta is None:
            assert answer is None, (position, pace)
            continue
        for key in ("p10", "p50", "p90"):
            assert answer[key] == pytest.approx(getattr(eta, key), rel=1e-9, abs=1e-9), (
                position,
                pace,
                key,
            )
