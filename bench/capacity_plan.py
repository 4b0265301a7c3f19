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

Pure: only ``main`` reads files and prints. The poll interval is the room's own rule
(queueing/rules/polling.py), imported rather than restated.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queueing.rules.polling import poll_after_seconds

# ---------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class UnitCosts:
    """What one operation costs, from bench/unit_costs.json (CPU in ms or µs of one core)."""

    web_ms_per_join: float  # lean join path, join limits on, all web processes
    postgresql_ms_per_join: float  # the web processes' backends
    slot_us_per_join: float  # Redis CPU on the on-sale's own keys (index add, the answer)
    redis_us_per_join: float  # all of it, the join limits' keys (other slots) included
    web_us_per_poll: float
    slot_us_per_poll: float  # locate.lua: all on the on-sale's keys; on a line of `poll_line`
    poll_line: int
    web_us_per_socket_second: float  # a waiting page's socket, one tick a second
    slot_us_per_socket_second: float  # its keep-alive (a ZADD per process); on `socket_line`
    socket_line: int
    keepalive_refresh_s: float
    # (line, locate.lua's server µs per call, the keep-alive's µs per ticket) on synthetic
    # lines: both grow with the line, which the two figures above were not measured at.
    by_line: tuple[tuple[int, float, float], ...]
    kib_per_socket: float
    web_process_mib: float  # an idle web process
    lock_held_ms: tuple[tuple[int, float], ...]  # (batch size, the chain head's hold), measured
    lock_ms_per_admitted: float  # an admission appends its records under the same lock
    admission_ms_per_500: float  # wall time of an admission of 500 (must fit in a tick)
    handover_ms: float  # Django hands an admitted fan its pass
    worker_ms_per_tick: float  # one on-sale's tick, at `tick_admitted` fans admitted
    tick_admitted: float
    slot_us_per_tick: float
    postgresql_connections_per_tick: float  # Celery opens its pool anew for every task
    dispatch_ms_per_on_sale: float
    entry_bytes: float  # a queue entry row, indexes included
    audit_bytes: float  # an audit record row, indexes included
    redis_bytes_per_fan: float  # a waiting fan in the hot index

    @classmethod
    def from_measurements(cls, data: dict[str, Any], pick: str = "median") -> UnitCosts:
        """``pick`` which run of each cost: "median", or "max" (the worst run) or "min". The
        chain head's holds are always the median: a run in which the shared machine stalled
        the lock's holder (one measured 272 ms for a batch of 200 against 33-37 ms) says what
        a stall costs, not how many joins the lock lets through."""

        def worse_setup(*spreads: dict[str, float]) -> float:
            # Measured with 1 and with 2 web processes: the costlier of the two.
            return max(s[pick] for s in spreads)

        http = data["http"].values()
        batches = data["join_batches"]
        sockets = data["sockets"]
        largest = sockets[str(max(int(n) for n in sockets if n.isdigit()))]
        admission, ticks = data["admission"], data["ticks"]
        return cls(
            web_ms_per_join=worse_setup(*(h["joins"]["web_cpu_ms"] for h in http)),
            postgresql_ms_per_join=worse_setup(*(h["joins"]["postgresql_cpu_ms"] for h in http)),
            # Full batches, as at a peak (smaller ones measure the server's own background work
            # more than the joins).
            slot_us_per_join=batches["200"]["redis_cpu_us_per_join"][pick],
            redis_us_per_join=worse_setup(*(h["joins"]["redis_cpu_us"] for h in http)),
            web_us_per_poll=worse_setup(*(h["polls"]["web_cpu_us"] for h in http)),
            slot_us_per_poll=worse_setup(*(h["polls"]["redis_cpu_us"] for h in http)),
            poll_line=data["storage"]["redis_line"],
            web_us_per_socket_second=largest["web_cpu_us_per_socket_second"],
            slot_us_per_socket_second=largest["keepalive_us_per_socket_second"],
            socket_line=max(int(n) for n in sockets if n.isdigit()),
            keepalive_refresh_s=data["keepalive_refresh_seconds"],
            by_line=tuple(
                sorted(
                    (
                        int(n),
                        line["locate"]["server_cpu_us_per_call"][pick],
                        line["keepalive_us_per_member"][pick],
                    )
                    for n, line in data["redis_by_line"].items()
                )
            ),
            kib_per_socket=sockets["kib_per_socket"],
            web_process_mib=largest["worker_rss_mib_idle"],
            lock_held_ms=tuple(
                sorted((int(n), b["chain_head_held_ms"]["median"]) for n, b in batches.items())
            ),
            lock_ms_per_admitted=admission["chain_head_held_ms"][pick] / admission["fans"],
            admission_ms_per_500=admission["wall_ms"][pick] * 500 / admission["fans"],
            # The median: the slowest is the first, Django's warm-up.
            handover_ms=data["pass_handover"]["wall_ms_each"]["median"],
            worker_ms_per_tick=ticks["worker_cpu_ms_per_tick"],
            tick_admitted=ticks["rate_per_minute"] / 60,
            slot_us_per_tick=ticks["hot_redis_cpu_us_per_tick"],
            postgresql_connections_per_tick=ticks["postgresql_connections_per_tick"],
            dispatch_ms_per_on_sale=data["dispatch"]["ms_per_on_sale"][pick],
            entry_bytes=data["storage"]["queue_entry_bytes"],
            audit_bytes=data["storage"]["audit_record_bytes"],
            redis_bytes_per_fan=data["storage"]["redis_bytes_per_waiting_fan"],
        )


@dataclass(frozen=True)
class Segment:
    minutes: float
    share: float  # of all fans, arriving evenly over the segment


@dataclass(frozen=True)
class Box:
    cores: int
    memory_gib: float


@dataclass(frozen=True)
class Scenario:
    name: str
    fans: int
    arrivals: tuple[Segment, ...]
    start_minute: float  # the line starts (the pre-queue is shuffled in) at this minute
    admissions_per_minute: int
    sell_out_after: int | None  # admissions; then the on-sale closes
    websocket_share: float  # of the pages in line; the others poll
    heartbeat_seconds: int
    join_batch: int  # WR_JOIN_BATCH_MAX
    admission_batch: int  # WR_ADMISSION_BATCH
    revoke_batch: int  # fans revoked per tick after the close (line/schedule.py)
    audit_records_per_fan: float  # joined, and how the wait ended
    audit_records_per_admitted: float  # more for those admitted: the session's end
    web: Box
    postgresql: Box
    worker: Box
    redis: Box  # one Redis Cluster master: it runs commands on one core
    target_utilisation: float
    on_sales: int = 1  # this many such on-sales at once, each with `fans` of its own
    notes: tuple[str, ...] = field(default=())

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Scenario:
        fields = dict(data)
        fields["arrivals"] = tuple(Segment(**s) for s in data["arrivals"])
        for kind in ("web", "postgresql", "worker", "redis"):
            fields[kind] = Box(**data[kind])
        fields["notes"] = tuple(data.get("notes", ()))
        return cls(**fields)


# ---------------------------------------------------------------------------- the line


@cache
def _polls_ahead(heartbeat_seconds: int) -> tuple[float, ...]:
    """Polls per second of the fans at positions 1..k, for every k until the interval stops
    growing: cumulative sums of 1 / poll_after_seconds(position)."""
    sums, total, position = [0.0], 0.0, 1
    while True:
        interval = poll_after_seconds(heartbeat_seconds=heartbeat_seconds, position=position)
        total += 1 / interval
        sums.append(total)
        if interval >= _keep_alive(heartbeat_seconds):
            return tuple(sums)
        position += 1


def _keep_alive(heartbeat_seconds: int) -> float:
    return poll_after_seconds(heartbeat_seconds=heartbeat_seconds, position=None)


def polls_per_second(waiting: float, heartbeat_seconds: int) -> float:
    """Status polls a second from a line of ``waiting`` polling fans (all at their pace: those
    near the front poll every second, those far back every keep-alive interval)."""
    sums = _polls_ahead(heartbeat_seconds)
    front = min(int(waiting), len(sums) - 1)
    return sums[front] + (waiting - front) / _keep_alive(heartbeat_seconds)


def _on_log_line(points: list[tuple[int, float]], x: float) -> float:
    """y at x on straight lines through the measured points against log x (a sorted set's
    costs grow with the log of its size); past either end, on the line through the nearest
    two."""
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1 or (x1, y1) == points[-1]:
            t = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + (y1 - y0) * t
    raise ValueError("at least two measured line sizes are needed")


def poll_slot_us(costs: UnitCosts, line: float) -> float:
    """A status poll's Redis CPU on a line of ``line``: as measured over HTTP, plus what
    locate.lua's own work grew by from the line it was measured on."""
    locate = [(n, us) for n, us, _ in costs.by_line]
    grown = _on_log_line(locate, max(line, 1)) - _on_log_line(locate, costs.poll_line)
    return costs.slot_us_per_poll + max(0.0, grown)


def keepalive_slot_us(costs: UnitCosts, line: float) -> float:
    """A socket's keep-alive, Redis CPU per second, on a line of ``line``: as measured with
    the sockets, plus the growth of a ticket's update in the heartbeats' sorted set."""
    member = [(n, us) for n, _, us in costs.by_line]
    grown = _on_log_line(member, max(line, 1)) - _on_log_line(member, costs.socket_line)
    return costs.slot_us_per_socket_second + max(0.0, grown) / costs.keepalive_refresh_s


def lock_held_ms(costs: UnitCosts, batch: float) -> float:
    """How long a join batch holds the chain head: between the measured sizes on the straight
    line joining their holds, beyond them on the line through the two nearest. Not one line
    through all: the measured holds do not lie on one."""
    points = costs.lock_held_ms
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if batch <= x1 or (x1, y1) == points[-1]:
            return max(0.0, y0 + (y1 - y0) * (batch - x0) / (x1 - x0))
    raise ValueError("at least two measured batch sizes are needed")


def lock_ceiling(costs: UnitCosts, batch: int) -> float:
    """Joins a second one on-sale's audit chain head lets through, batches of ``batch``."""
    return batch / lock_held_ms(costs, batch) * 1000


@dataclass(frozen=True)
class Second:
    t: int
    offered: float  # joins asked for this second (new fans and retries)
    joins: float  # committed
    admitted: float
    prequeue: float
    waiting: float
    polls: float
    sockets: float


def arrival_rates(scenario: Scenario) -> list[float]:
    """New fans a second, second by second."""
    rates: list[float] = []
    for segment in scenario.arrivals:
        seconds = round(segment.minutes * 60)
        rates += [scenario.fans * segment.share / seconds] * seconds
    return rates


def simulate(costs: UnitCosts, scenario: Scenario, limit_hours: float = 72) -> Iterator[Second]:
    """The line, second by second, until every fan has joined and the line is empty or sold
    out (or ``limit_hours``)."""
    arrivals = arrival_rates(scenario)
    ceiling = lock_ceiling(costs, scenario.join_batch)
    start = round(scenario.start_minute * 60)
    pace = scenario.admissions_per_minute / 60
    ws = scenario.websocket_share
    keep_alive = _keep_alive(scenario.heartbeat_seconds)
    backlog = prequeue = waiting = admitted_total = 0.0
    for t in range(round(limit_hours * 3600)):
        offered = (arrivals[t] if t < len(arrivals) else 0.0) + backlog
        # The chain head's lock, shared with the admissions' records, bounds the commits.
        room = ceiling * max(0.0, 1 - pace * costs.lock_ms_per_admitted / 1000)
        joins = min(offered, room)
        backlog = offered - joins
        admitted = 0.0
        if t < start:
            prequeue += joins
        else:
            waiting += prequeue + joins
            prequeue = 0.0
            left = (scenario.sell_out_after or math.inf) - admitted_total
            admitted = min(pace, waiting, left)
            waiting -= admitted
            admitted_total += admitted
        in_line = waiting + prequeue
        yield Second(
            t=t,
            offered=offered,
            joins=joins,
            admitted=admitted,
            prequeue=prequeue,
            waiting=waiting,
            polls=(1 - ws) * (polls_per_second(waiting, scenario.heartbeat_seconds))
            + (1 - ws) * prequeue / keep_alive,
            sockets=ws * in_line,
        )
        if scenario.sell_out_after is not None and admitted_total >= scenario.sell_out_after:
            return  # the on-sale closes: later joins are refused, the line is revoked
        if t >= len(arrivals) and backlog < 1 and (waiting < 1 or pace == 0):
            return  # everyone has joined, and the line is empty or never moves


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
        "revoke_hours_after_sell_out": left_waiting / scenario.revoke_batch / 3600,
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
        f"the sell-out takes {st['revoke_hours_after_sell_out']:,.1f} h ({s.revoke_batch:,} a "
        f"tick). Join ceiling at batches of {s.join_batch}: "
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
