"""One scenario against a running room: set up its on-sale, drive it, judge it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from queueing.rules.eta import configured_pace
from rehearsal import figures
from rehearsal.fans import FanRecord, Rehearsal, client_pool
from rehearsal.onsale import entry_facts, line_started_wait, sale_create, staff_token
from rehearsal.scenarios import Scenario

COVERAGE_TARGET = 0.80
RISES_TARGET = 0.10


def outcomes(records: list[FanRecord]) -> list[figures.FanOutcome]:
    facts = entry_facts(r.ticket for r in records if r.ticket)
    result = []
    for record in records:
        if record.ticket is None:
            continue
        fact = facts.get(record.ticket)
        result.append(
            figures.FanOutcome(
                tier=record.tier,
                prequeue=record.prequeue,
                arrived_at=record.arrived_at,
                quote=record.quote,
                quoted_at=record.quoted_at,
                admitted_at=fact.admitted_at if fact else None,
                order_key=fact.order_key if fact else None,
                shown_p50=tuple(record.shown_p50),
                left_at=record.left_at if fact is None or fact.admitted_at is None else None,
                checked_out_at=record.checked_out_at,
            )
        )
    return result


def verdict(scenario: Scenario, quotes: dict[str, Any]) -> dict[str, Any]:
    coverage = quotes["coverage"]
    rises = quotes["rises_share"]
    return {
        "coverage_met": coverage is not None and coverage >= COVERAGE_TARGET,
        # Where staff cut the pace, estimates are expected to go up: not judged there.
        "rises_judged": not scenario.staff_cut_pace,
        "rises_met": scenario.staff_cut_pace or (rises is not None and rises < RISES_TARGET),
    }


async def rehearse(
    scenario: Scenario, *, base_url: str, log: Callable[[str], None] = print
) -> dict[str, Any]:
    sale = await asyncio.to_thread(sale_create, scenario)
    token = await asyncio.to_thread(staff_token)
    log(f"{scenario.name}: {scenario.title} ({sale.slug})")
    async with client_pool(base_url) as client:
        run = Rehearsal(
            scenario,
            client=client,
            slug=sale.slug,
            integration_key=sale.integration_key,
            staff_token=token,
            log=log,
        )

        async def line_started() -> None:
            await asyncio.to_thread(line_started_wait, sale.event_id, timeout=120.0)

        began = time.time()
        started = await run.run(line_started=line_started)
        ended = time.time()
    fans = await asyncio.to_thread(outcomes, run.fans)
    line_start = min([started] + [f.arrived_at for f in fans if f.prequeue])
    quotes = figures.quote_figures(fans)
    result = {
        "name": scenario.name,
        "title": scenario.title,
        "slug": sale.slug,
        "seconds": round(ended - began, 1),
        "settings": {
            "capacity": scenario.capacity,
            "rate_per_minute": scenario.rate_per_minute,
            "checkout_mean_seconds": scenario.checkout_mean_seconds,
            "fans": scenario.fans,
            "prequeue_fans": scenario.prequeue_fans,
            "arrivals_per_second": scenario.arrivals_per_second,
        },
        "figures": {
            "fans": len(run.fans),
            "refused": sum(1 for r in run.fans if r.refused),
            "admitted": sum(1 for f in fans if f.admitted_at is not None),
            # Ticket API requests per fan besides the join (pages ask only now and then).
            "polls_per_fan": round(sum(r.polls for r in run.fans) / max(1, len(run.fans)), 2),
            "quotes": quotes,
            "throughput": figures.throughput_figures(
                fans,
                configured_pace=configured_pace(
                    rate_per_minute=scenario.rate_per_minute,
                    capacity=scenario.capacity,
                    session_seconds=scenario.session_seconds,
                ),
            )
            | {"shop_pace_per_s": _shop_pace(scenario)},
            "tiers": figures.tier_figures(fans, started),
            "line": figures.line_length_over_time(fans, start=line_start, end=ended),
            "realized": figures.realized(fans, line_started=started),
        },
        "staff": [(round(t - started, 1), what) for t, what in run.staff_log],
        # The pace the ticks told pages (admissions/s, its relative error; None: no estimate).
        "pace_told": _pace_told(run.messages.ticks, started),
        "fans": [
            {
                "tier": f.tier,
                "quote": f.quote,
                "quoted_at": f.quoted_at,
                "waited": f.waited,
                # From admission to the shop's checkout report: noticing, picking up, buying.
                "shop_s": round(f.checked_out_at - f.admitted_at, 2)
                if f.checked_out_at is not None and f.admitted_at is not None
                else None,
                "rose": figures.rose(f.shown_p50),
            }
            for f in fans
        ],
    }
    result["verdict"] = verdict(scenario, quotes)
    log(
        f"  {result['figures']['admitted']} admitted in {result['seconds']} s; coverage "
        f"{quotes['coverage']}, median error {quotes['median_error_s']} s (signed "
        f"{quotes['median_signed_error_s']}), rises {quotes['rises_share']}"
    )
    return result


def _pace_told(
    ticks: list[tuple[float, str, dict[str, Any] | None]], started: float
) -> list[tuple[float, str, float | None, float | None]]:
    told = []
    for at, state, throughput in ticks:
        shown = throughput is not None and not throughput.get("ranged")
        told.append(
            (
                round(at - started, 1),
                state,
                round(throughput["lam"], 2) if shown and throughput else None,
                round(throughput["err"], 2) if shown and throughput else None,
            )
        )
    return told


def _shop_pace(scenario: Scenario) -> float | None:
    """What the shop can take when checkouts alone set the pace (capacity / mean checkout)."""
    if not scenario.capacity:
        return None
    return round(scenario.capacity / scenario.checkout_mean_seconds, 3)
