"""A capacity plan from measured unit costs: the machines an on-sale (or several at once) needs,
and the limit it meets first.

    python bench/capacity_plan.py bench/unit_costs.json bench/scenarios/*.json [--pick max]

The measured costs (bench/unit_costs.py writes them) and a scenario (fans, their arrival curve,
the admission pace, the share of pages on WebSockets, the machines' size: bench/scenarios/)
go in. The line is simulated second by second: joins (never more per second than the
on-sale's audit chain head lets through; the rest retry, as a refused join does), the
pre-queue moving into the line at the start, admissions at the pace, and the polls and
sockets of everyone in line. Each second's demand on each component follows from the unit
costs; the peaks, divided by what one machine of each kind gives at the target utilisation,
are the machines. Limits no number of machines lifts are checked apart: the chain head's
lock, the on-sale's hot index on one Redis slot (one core), the batch per tick, the dispatch.

Pure: only ``main`` reads files and prints. The inputs are in bench/capacity_inputs.py, the
line's second-by-second simulation in bench/capacity_line.py.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.capacity_inputs import Box, Scenario, UnitCosts
from bench.capacity_line import (
    Second,
    keepalive_slot_us,
    lock_ceiling,
    lock_held_ms,
    poll_slot_us,
    simulate,
)

# ---------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Load:
    """One second's demand: cores of each kind, and the web processes' memory."""

    web_cores: float
    web_gib: float  # the sockets' memory
    postgresql_cores: float
    worker_cores: float
    slot_cores: float  # the Redis core serving the on-sale's hot index
    redis_cores: float  # the on-sale's Redis work on any slot (join limits spread over all)
    lock_busy: float  # of each second, the chain head's lock is held this long
    rows_per_s: float


def load(costs: UnitCosts, scenario: Scenario, s: Second) -> Load:
    """What one on-sale's second costs."""
    # One tick a second; its cost taken to grow with the fans it admits, from the measured size.
    tick = max(1.0, s.admitted / costs.tick_admitted)
    line = s.waiting + s.prequeue
    slot = (
        s.joins * costs.slot_us_per_join
        + s.polls * poll_slot_us(costs, line)
        + s.sockets * keepalive_slot_us(costs, line)
        + tick * costs.slot_us_per_tick
    ) / 1e6
    return Load(
        web_cores=s.joins * costs.web_ms_per_join / 1e3
        + s.polls * costs.web_us_per_poll / 1e6
        + s.sockets * costs.web_us_per_socket_second / 1e6
        + s.admitted * costs.handover_ms / 1e3,
        web_gib=s.sockets * costs.kib_per_socket / 2**20,
        postgresql_cores=s.joins * costs.postgresql_ms_per_join / 1e3,
        worker_cores=tick * costs.worker_ms_per_tick / 1e3,
        slot_cores=slot,
        redis_cores=slot + s.joins * (costs.redis_us_per_join - costs.slot_us_per_join) / 1e6,
        # Full batches at the peak: the lock's own queue fills them (group commit).
        lock_busy=s.joins / scenario.join_batch * lock_held_ms(costs, scenario.join_batch) / 1e3
        + s.admitted * costs.lock_ms_per_admitted / 1e3,
        # A join: its entry and its record (and the head, once a batch); an admission: the
        # entry's move and its record; the hand-over: the entry again.
        rows_per_s=s.joins * (2 + 1 / scenario.join_batch) + s.admitted * 3,
    )


@dataclass(frozen=True)
class Peak:
    value: float
    at_minute: float


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    seconds: int
    peaks: dict[str, Peak]
    machines: dict[str, int]
    ceilings: dict[str, tuple[float, float]]  # name -> (peak use, limit)
    storage: dict[str, float]
    last_join_minute: float
    bottleneck: str


def plan(costs: UnitCosts, scenario: Scenario) -> Plan:
    peaks: dict[str, Peak] = {}
    seconds, last_join, admitted, joined, left_waiting = 0, 0, 0.0, 0.0, 0.0

    def keep(name: str, value: float, t: int) -> None:
        if name not in peaks or value > peaks[name].value:
            peaks[name] = Peak(value, t / 60)

    for s in simulate(costs, scenario):
        seconds, admitted, joined = s.t + 1, admitted + s.admitted, joined + s.joins
        left_waiting = s.waiting + s.prequeue
        if s.joins >= 1:
            last_join = s.t
        demand = load(costs, scenario, s)
        for name, value in vars(demand).items():
            keep(name, value, s.t)
        for name in ("offered", "joins", "polls", "sockets", "waiting", "prequeue"):
            keep(name, getattr(s, name), s.t)
        keep("in_line", s.waiting + s.prequeue, s.t)
        keep("backlog", s.offered - s.joins, s.t)

    u, n = scenario.target_utilisation, scenario.on_sales
    # The on-sales' curves are taken to peak together (the most load). One web process per
    # core, each holding its idle memory besides its sockets'.
    web = scenario.web
    socket_gib_per_box = web.memory_gib * u - web.cores * costs.web_process_mib / 1024
    slot_gb = peaks["in_line"].value * costs.redis_bytes_per_fan / 1e9
    machines = {
        "web": math.ceil(
            n
            * max(
                peaks["web_cores"].value / (web.cores * u),
                peaks["web_gib"].value / socket_gib_per_box,
            )
        ),
        "postgresql": math.ceil(
            n * peaks["postgresql_cores"].value / (scenario.postgresql.cores * u)
        ),
        "worker": math.ceil(n * peaks["worker_cores"].value / (scenario.worker.cores * u)),
        "redis": math.ceil(
            max(
                n * peaks["redis_cores"].value / (scenario.redis.cores * u),
                n * slot_gb / (scenario.redis.memory_gib * u),
                1,
            )
        ),
    }
    pace = scenario.admissions_per_minute / 60
    # Hard limits, whatever the machines: used / limit. The first four are each on-sale's.
    ceilings = {
        "audit chain head: lock held, s per s": (peaks["lock_busy"].value, 1.0),
        "hot index on one Redis slot: cores": (peaks["slot_cores"].value, 1.0),
        "admissions per tick": (pace, float(scenario.admission_batch)),
        "admission of 500 fans, s (within its 1 s tick)": (costs.admission_ms_per_500 / 1e3, 1.0),
        "dispatch of all on-sales' ticks, s (within its 1 s beat)": (
            n * costs.dispatch_ms_per_on_sale / 1e3,
            1.0,
        ),
        "one PostgreSQL primary: cores": (
            n * peaks["postgresql_cores"].value,
            float(scenario.postgresql.cores),
        ),
    }
    entries = n * joined
    records = n * (
        joined * scenario.audit_records_per_fan + admitted * scenario.audit_records_per_admitted
    )
    storage = {
        "entries": entries,
        "audit_records": records,
        "postgresql_gb": (entries * costs.entry_bytes + records * costs.audit_bytes) / 1e9,
        "redis_gb_one_slot": slot_gb,
        "revoke_hours_after_sell_out": left_waiting / scenario.revoke_per_second / 3600,
    }
    use = {name: used / limit for name, (used, limit) in ceilings.items()}
    return Plan(
        scenario=scenario,
        seconds=seconds,
        peaks=peaks,
        machines=machines,
        ceilings=ceilings,
        storage=storage,
        last_join_minute=last_join / 60,
        bottleneck=max(use, key=lambda name: use[name]),
    )


# ---------------------------------------------------------------------------- the report


def render(p: Plan, costs: UnitCosts) -> str:
    s, pk, n = p.scenario, p.peaks, p.scenario.on_sales
    each = f" (each of the {n} on-sales)" if n > 1 else ""
    out = [f"### {s.name}", ""]
    out += [f"- {note}" for note in s.notes]
    out += [
        "",
        f"Simulated {p.seconds / 3600:.1f} h; last join committed at minute "
        f"{p.last_join_minute:.0f}; joins waiting to be retried at most "
        f"{pk['backlog'].value:,.0f}.",
        "",
        f"| peak{each} | value | at minute |",
        "|---|---|---|",
    ]
    rows = [
        ("joins offered /s", "offered", "{:,.0f}"),
        ("joins committed /s", "joins", "{:,.0f}"),
        ("fans in line", "in_line", "{:,.0f}"),
        ("status polls /s", "polls", "{:,.0f}"),
        ("open sockets", "sockets", "{:,.0f}"),
        ("web cores", "web_cores", "{:,.1f}"),
        ("web memory for sockets, GiB", "web_gib", "{:,.1f}"),
        ("PostgreSQL cores (backends)", "postgresql_cores", "{:,.2f}"),
        ("PostgreSQL rows written /s", "rows_per_s", "{:,.0f}"),
        ("worker cores", "worker_cores", "{:,.2f}"),
        ("Redis cores, the on-sale's slot", "slot_cores", "{:,.2f}"),
        ("Redis cores, all slots", "redis_cores", "{:,.2f}"),
        ("chain head lock held, s per s", "lock_busy", "{:,.2f}"),
    ]
    for label, key, fmt in rows:
        out.append(f"| {label} | {fmt.format(pk[key].value)} | {pk[key].at_minute:,.0f} |")
    out += ["", "| machines, all on-sales | count | each |", "|---|---|---|"]
    for kind, count in p.machines.items():
        box: Box = getattr(s, kind)
        out.append(f"| {kind} | {count} | {box.cores} cores, {box.memory_gib:g} GiB |")
    out += [
        "",
        f"Sockets per web machine at the peak: {n * pk['sockets'].value / p.machines['web']:,.0f}; "
        f"every machine planned to {s.target_utilisation:.0%} of its cores and memory.",
        "",
        "| structural ceiling | peak use | limit | use |",
        "|---|---|---|---|",
    ]
    for name, (used, limit) in p.ceilings.items():
        mark = " **(bottleneck)**" if name == p.bottleneck else ""
        out.append(f"| {name}{mark} | {used:,.2f} | {limit:,.2f} | {used / limit:.0%} |")
    st = p.storage
    out += [
        "",
        f"Storage: {st['entries']:,.0f} queue entries and {st['audit_records']:,.0f} audit "
        f"records, {st['postgresql_gb']:,.1f} GB in PostgreSQL; each on-sale's hot index at its "
        f"peak {st['redis_gb_one_slot']:,.2f} GB on one Redis slot. Revoking the line left at "
        f"the sell-out takes {st['revoke_hours_after_sell_out']:,.1f} h ({s.revoke_per_second:,} a "
        f"second). Join ceiling at batches of {s.join_batch}: "
        f"{lock_ceiling(costs, s.join_batch):,.0f}/s per on-sale. Celery opens "
        f"{n * costs.postgresql_connections_per_tick:,.0f} PostgreSQL connections a second "
        f"for the ticks.",
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("costs", type=Path, help="bench/unit_costs.json")
    parser.add_argument("scenarios", type=Path, nargs="+", help="bench/scenarios/*.json")
    parser.add_argument("--pick", choices=("median", "max", "min"), default="median")
    options = parser.parse_args(argv)
    costs = UnitCosts.from_measurements(json.loads(options.costs.read_text()), options.pick)
    for path in options.scenarios:
        scenario = Scenario.from_json(json.loads(path.read_text()))
        print(render(plan(costs, scenario), costs))


if __name__ == "__main__":
    main()
