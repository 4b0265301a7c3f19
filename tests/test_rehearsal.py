"""A short rehearsal in the suite: synthetic fans through the real processes (gunicorn with
uvicorn workers, Celery worker and beat), and the quotes they were given must hold."""

from __future__ import annotations

import asyncio

import pytest

from rehearsal.rehearse import rehearse
from rehearsal.scenarios import STEADY
from tests.processes import running_stack

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

# Below the 80% target: a short run on a shared machine has few fans to judge (the
# full scenarios in `make rehearse` / `make bench` are held to 80%).
COVERAGE_FLOOR = 0.75


def test_a_steady_sale_keeps_its_quotes() -> None:
    scenario = STEADY.scaled(0.5)  # 80 fans, about 40 s
    with running_stack() as stack:
        base = stack.web_at_public_url()
        stack.worker(concurrency=2)
        stack.beat()
        result = asyncio.run(rehearse(scenario, base_url=base, log=lambda _: None))
    figures = result["figures"]
    quotes = figures["quotes"]
    assert figures["refused"] == 0
    left = sum(t["left"] for t in figures["tiers"].values())
    assert figures["admitted"] + left == figures["fans"]
    assert quotes["quoted_and_admitted"] >= 40
    assert quotes["coverage"] >= COVERAGE_FLOOR, quotes
    assert quotes["rises_share"] < 0.10, quotes
    assert all(t["inversions"] == 0 for t in figures["tiers"].values())
    # Capacity-bound: the pace is the shop's (5 places, 2 s checkouts), not the settings'.
    assert figures["throughput"]["admitted_per_s"] > 1.0
