"""The capacity plan's sensitivity tables (docs/scaling.md): one scenario planned again with
some of its fields changed, a row per change, at its joins' peak.

    python bench/capacity_sensitivity.py bench/unit_costs.json \\
        bench/scenarios/onsale_50m_one.json \\
        --vary returning_share=0,0.25,0.5,1 --vary join_linger_ms=0,25,50,100

Every combination of the ``--vary`` values is a row. Pure but for ``main``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.capacity_inputs import Scenario, UnitCosts
from bench.capacity_line import batch_as_formed
from bench.capacity_plan import plan

COLUMNS = (
    "a lane's head held, s per s",
    "batch as formed",
    "newcomers' part",
    "other lanes' parts",
    "a joining process",
    "PostgreSQL cores",
    "join transactions/s",
    "web cores",
    "a slot's cores",
    "all under 60%",
)


def row(costs: UnitCosts, scenario: Scenario) -> list[str]:
    result = plan(costs, scenario)
    peaks, top = result.peaks, result.at_join_peak
    formed = batch_as_formed(costs, scenario, peaks["joins"].value)
    target = scenario.target_utilisation
    over = [
        name
        for name, (used, limit) in result.ceilings.items()
        if used / limit >= target and name != "admissions per tick"  # the pace, chosen
    ]
    return [
        f"{peaks['lane_lock_held'].value:.2f}",
        f"{formed.fans:.1f}",
        f"{formed.newcomers_part:.1f}" if formed.newcomers_parts else "-",
        f"{formed.other_part:.2f}" if formed.other_parts else "-",
        f"{peaks['join_process_cores'].value:.0%}",
        f"{peaks['postgresql_cores'].value:.1f}",
        f"{top.join_transactions:,.0f}",
        f"{peaks['web_cores'].value:,.0f}",
        f"{peaks['slot_cores'].value:.2f}",
        "yes" if not over else "no: " + "; ".join(name.split(":")[0] for name in over),
    ]


def _value(text: str) -> float | int:
    number = float(text)
    return int(number) if number.is_integer() and "." not in text else number


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("costs", type=Path)
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--vary", action="append", default=[], help="field=v1,v2,...")
    parser.add_argument("--pick", choices=("median", "max", "min"), default="median")
    options = parser.parse_args(argv)
    costs = UnitCosts.from_measurements(json.loads(options.costs.read_text()), options.pick)
    base = Scenario.from_json(json.loads(options.scenario.read_text()))
    fields = [spec.split("=", 1) for spec in options.vary]
    values = [[_value(v) for v in spec.split(",")] for _, spec in fields]
    names = [name for name, _ in fields]
    print("| " + " | ".join([*names, *COLUMNS]) + " |")
    print("|" + "---|" * (len(names) + len(COLUMNS)))
    for combination in itertools.product(*values):
        changes = dict(zip(names, combination, strict=True))
        if "lanes" in changes and "join_batch" not in changes:
            # A full part of 200 at any number of lanes, as the scenarios keep it.
            changes["join_batch"] = 200 * int(changes["lanes"])
        cells = [f"{v:g}" for v in combination]
        print("| " + " | ".join(cells + row(costs, replace(base, **changes))) + " |")


if __name__ == "__main__":
    main()
