"""A capacity plan from measured unit costs: the machines an on-sale (or several at once) needs,
and the limit it meets first.

    python bench/capacity_plan.py bench/unit_costs.json bench/scenarios/*.json [--pick max]

The measured costs (bench/unit_costs.py writes them) and a scenario (fans, their arrival curve,
the admission pace, the share of pages on WebSockets, the lanes, the web processes taking
joins, the machines' size: bench/scenarios/) go in. The line is simulated second by second:
joins (never more per second than the chain heads let through in full parts; the rest retry,
as a refused join does), the pre-queue moving into the line at the start, admissions at the
pace, and the polls and sockets of everyone in line, each lane with its share. Each second's
demand on each component follows from the unit costs, a join's from the size of the parts its
lane's head commits; the peaks, divided by what one machine of each kind gives at the target
utilisation, are the machines. Limits no number of machines lifts are checked apart: each
lane's chain head and the root's, each lane's hot index on one Redis slot (one core), a
joining web process's core, the batch per tick, the dispatch, the one PostgreSQL primary.

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
    batch_as_formed,
    batch_committed,
    full_part,
    join_views_load,
    keepalive_slot_us,
    lane_held,
    lock_ceiling,
    poll_slot_us,
    postgresql_ms_per_join,
    simulate,
    web_ms_per_join,
)

# ---------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Load:
    """One second's demand: cores of each kind, and the web processes' memory."""

    web_cores: float
    web_gib: float  # the sockets' memory
    postgresql_cores: float
    worker_cores: float
    slot_cores: float  # the Redis core serving one lane's part of the hot index
    slot_gb: float  # one lane's part of the hot index: its fans, and its join views
    views_slot_cores: float  # of ``slot_cores``, the join views' (a laned line's)
    views_slot_mb: float  # of ``slot_gb``, the join views'
    views_web_ms_per_join: float  # the batch thread's CPU on a join's views
    redis_cores: float  # the on-sale's Redis work on any slot (join limits spread over all)
    # A lane's chain head: its joins over what it lets through in full parts (group commit).
    lane_lock_use: float
    # Of each second, a lane's head would be held this long with batches as they form without
    # waiting for it; over 1, joins queue for it and the batches grow (``batch``).
    lane_lock_held: float
    # The root's: admissions (and staff's records, not counted); with one lane, or an address
    # cap or a mode other than queue, every join's part too.
    root_lock_use: float
    root_lock_held: float  # as ``lane_lock_held``, the root's
    batch: float  # fans in a joining process's batch, as committed
    newcomers_part: float  # the fans of its newcomers' lane's part
    other_part: float  # the fans of each other lane's part that has any
    join_process_cores: float  # one joining web process's core
    join_transactions: float  # per second, one per part
    rows_per_s: float


def load(costs: UnitCosts, scenario: Scenario, s: Second) -> Load:
    """What one on-sale's second costs."""
    lanes = scenario.lanes
    # One tick a second; its cost taken to grow with the fans it admits, from the measured
    # size. Every lane's slot is charged a whole tick's (its summary read, its admission
    # counts and its fans' removals are not measured per lane): an upper bound.
    tick = max(1.0, s.admitted / costs.tick_admitted)
    lane_line = (s.waiting + s.prequeue) / lanes
    formed = batch_as_formed(costs, scenario, s.joins, views=s.started)
    batch = batch_committed(costs, scenario, s.joins, views=s.started)
    # Joins into a started laned line (the pre-queue's have none) count their fans in the
    # other lanes and keep their views. A poll of a laned line GETs its fan's view key in the
    # same script: one GET more, not measured apart (locate.lua's cost was measured on a line
    # of one lane) and left out.
    views = join_views_load(costs, scenario, s.joins if s.started else 0.0, batch)
    # A lane holds its share of the fans, of their polls, sockets and joins.
    slot = (
        s.joins / lanes * costs.slot_us_per_join
        + s.polls / lanes * poll_slot_us(costs, lane_line)
        + s.sockets / lanes * keepalive_slot_us(costs, lane_line)
        + tick * costs.slot_us_per_tick
    ) / 1e6 + views.slot_cores
    sockets_us = (
        s.sockets * costs.web_us_per_socket_second
        if costs.bands is None
        else costs.bands.web_us(s.waiting, s.prequeue) * scenario.websocket_share
    )
    full = full_part(scenario)
    admitting = s.admitted * costs.lock_ms_per_admitted / 1e3
    lane_use = s.joins / lanes / lock_ceiling(costs, full)
    held = lane_held(costs, scenario, s.joins, formed)
    root_use = root_held = admitting
    if lanes == 1:  # the one lane is the root
        lane_use = root_use = lane_use + admitting
        held = root_held = held + admitting
    elif scenario.joins_decided_on_sale_wide:  # every part takes the root's head too
        root_use += s.joins / lock_ceiling(costs, full)
        root_held += held * lanes
    per_process = s.joins / scenario.join_processes if scenario.join_processes else 0.0
    web_ms = web_ms_per_join(costs, scenario, batch) + views.web_ms_per_join
    transactions = s.joins / batch.fans * batch.transactions
    joining = s.joins >= 1
    return Load(
        web_cores=s.joins * web_ms / 1e3
        + s.polls * costs.web_us_per_poll / 1e6
        + sockets_us / 1e6
        + s.admitted * costs.handover_ms / 1e3,
        web_gib=s.sockets * costs.kib_per_socket / 2**20,
        postgresql_cores=s.joins * postgresql_ms_per_join(costs, batch) / 1e3,
        worker_cores=tick * costs.worker_ms_per_tick / 1e3,
        slot_cores=slot,
        slot_gb=(lane_line * costs.redis_bytes_per_fan + views.slot_bytes) / 1e9,
        views_slot_cores=views.slot_cores,
        views_slot_mb=views.slot_bytes / 1e6,
        views_web_ms_per_join=views.web_ms_per_join,
        redis_cores=lanes * slot
        + s.joins * (costs.redis_us_per_join - costs.slot_us_per_join) / 1e6,
        lane_lock_use=lane_use,
        lane_lock_held=held,
        root_lock_use=root_use,
        root_lock_held=root_held,
        batch=batch.fans if joining else 0.0,
        newcomers_part=batch.newcomers_part if joining else 0.0,
        other_part=batch.other_part if joining else 0.0,
        join_process_cores=per_process * web_ms / 1e3,
        join_transactions=transactions,
        # A join: its entry and its record (and its lane's head, once a part); an admission:
        # the entry's move and its record; the hand-over: the entry again.
        rows_per_s=s.joins * 2 + transactions + s.admitted * 3,
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
    at_join_peak: Load  # the second the most joins committed
    machines: dict[str, int]
    ceilings: dict[str, tuple[float, float]]  # name -> (peak use, limit)
    storage: dict[str, float]
    last_join_minute: float
    bottleneck: str
    # At the joins' peak, the most a join waits for its batch to linger (its batch's first
    # fan; a batch full sooner commits sooner): about half of it on average.
    linger_added_ms: float


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
        if "joins" not in peaks or s.joins > peaks["joins"].value:
            at_join_peak = demand
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
    slot_gb = peaks["slot_gb"].value
    # Lanes share a master while their slots together stay within the target.
    lanes_per_master = max(1, math.floor(u / peaks["slot_cores"].value))
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
                n * scenario.lanes * slot_gb / (scenario.redis.memory_gib * u),
                n * math.ceil(scenario.lanes / lanes_per_master),
            )
        ),
    }
    pace = scenario.admissions_per_minute / 60
    # Hard limits, whatever the machines: used / limit. All but the last two are each
    # on-sale's (each lane's, for a lane's).
    lane = "audit chain head" if scenario.lanes == 1 else "a lane's audit chain head"
    # What a lock lets through, in full parts; and how long it is held with batches as they
    # form, without waiting for it: over 1 s a second, joins queue for it (and the batches
    # grow until it is held all the time), so that is the figure a target judges.
    ceilings = {
        f"{lane}: joins / its ceiling in full parts": (peaks["lane_lock_use"].value, 1.0),
        f"{lane}: held, s per s (batches as they form)": (peaks["lane_lock_held"].value, 1.0),
    }
    if scenario.lanes > 1:
        root = (
            "admissions and joins"
            if scenario.joins_decided_on_sale_wide
            else "admissions (joins do not take it)"
        )
        ceilings |= {
            f"the root chain head: {root} / its ceiling": (peaks["root_lock_use"].value, 1.0),
            f"the root chain head: {root}, held, s per s": (peaks["root_lock_held"].value, 1.0),
        }
    if scenario.join_processes:
        ceilings["a joining web process: cores"] = (peaks["join_process_cores"].value, 1.0)
    ceilings |= {
        "hot index, one lane's Redis slot: cores": (peaks["slot_cores"].value, 1.0),
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
        "redis_gb_one_slot": slot_gb,  # one lane's
        "revoke_minutes_after_sell_out": left_waiting / scenario.revoke_per_second / 60,
    }
    use = {name: used / limit for name, (used, limit) in ceilings.items()}
    return Plan(
        scenario=scenario,
        seconds=seconds,
        peaks=peaks,
        at_join_peak=at_join_peak,
        machines=machines,
        ceilings=ceilings,
        storage=storage,
        last_join_minute=last_join / 60,
        bottleneck=max(use, key=lambda name: use[name]),
        linger_added_ms=_linger_added_ms(scenario, peaks["joins"].value),
    )


def _linger_added_ms(scenario: Scenario, joins: float) -> float:
    if not scenario.join_linger_ms or not scenario.join_processes or joins <= 0:
        return 0.0
    filled_ms = scenario.join_batch / (joins / scenario.join_processes) * 1000
    return min(scenario.join_linger_ms, filled_ms)


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
        ("PostgreSQL transactions /s for joins", "join_transactions", "{:,.0f}"),
        ("worker cores", "worker_cores", "{:,.2f}"),
        ("Redis cores, one lane's slot", "slot_cores", "{:,.2f}"),
        ("Redis cores, all slots", "redis_cores", "{:,.2f}"),
        ("a lane's chain head: joins / its ceiling", "lane_lock_use", "{:,.2f}"),
        ("a lane's chain head held, s per s (batches as they form)", "lane_lock_held", "{:,.2f}"),
        ("the root chain head: use of its ceiling", "root_lock_use", "{:,.2f}"),
        ("the root chain head held, s per s", "root_lock_held", "{:,.2f}"),
    ]
    for label, key, fmt in rows:
        out.append(f"| {label} | {fmt.format(pk[key].value)} | {pk[key].at_minute:,.0f} |")
    top = p.at_join_peak
    lingering = (
        f"lingering {s.join_linger_ms:g} ms, which adds at most {p.linger_added_ms:,.0f} ms to a "
        "join's answer (its batch's first fan), about half that on average"
        if s.join_linger_ms
        else "not lingering"
    )
    parts = (
        "one part, one lane"
        if s.lanes == 1
        else f"{1 - s.returning_share:.0%} of them new fans, drawn in the batch's newcomers' "
        f"lane, whose part holds {top.newcomers_part:,.1f} fans; each other lane's part that "
        f"has any holds {top.other_part:,.1f}"
    )
    out += [
        "",
        f"At the joins' peak a joining process's batch holds {top.batch:,.1f} fans (at most "
        f"{s.join_batch:,}; {lingering}): {parts}. The joins take "
        f"{top.join_transactions:,.0f} PostgreSQL transactions a second, "
        f"{top.postgresql_cores * 1e3 / max(pk['joins'].value, 1):,.3f} ms of backend CPU each"
        f" join; a joining web process is {top.join_process_cores:.0%} busy; a lane's head "
        f"is held {top.lane_lock_held:,.2f} s a second by batches as they form.",
    ]
    if s.lanes > 1 and costs.join_views is not None:
        out += [
            "",
            "Join views at the joins' peak (each batch's fans counted once in every other lane, "
            f"their views written part by part and kept {costs.join_views.view_seconds:g} s in "
            "their own): "
            f"{top.views_web_ms_per_join * 1e3:,.0f} µs of the batch thread a join; "
            f"{top.views_slot_cores:,.2f} of each lane's slot's {top.slot_cores:,.2f} cores; "
            f"{top.views_slot_mb:,.1f} MB of views in each slot.",
        ]
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
        f"records, {st['postgresql_gb']:,.1f} GB in PostgreSQL; each lane's hot index at its "
        f"peak {st['redis_gb_one_slot']:,.2f} GB on one Redis slot. Revoking the line left at "
        f"the sell-out takes {st['revoke_minutes_after_sell_out']:,.0f} min "
        f"({s.revoke_per_second:,} a second). Join ceiling in full parts of {full_part(s):,.0f}: "
        f"{lock_ceiling(costs, full_part(s)):,.0f}/s per lane, "
        f"{s.lanes * lock_ceiling(costs, full_part(s)):,.0f}/s per on-sale once it has "
        "started.",
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
