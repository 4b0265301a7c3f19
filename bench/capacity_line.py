"""The line of the capacity plan (bench/capacity_plan.py), second by second: joins as the audit
chain head lets them through, the pre-queue, admissions, and the polls and sockets of everyone
in line; and what a poll, a socket and a join batch cost on a line of a given length.

Pure. The poll interval is the room's own rule (queueing/rules/layout.py), imported rather
than restated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from bench.capacity_inputs import Scenario, UnitCosts
from queueing.rules.layout import poll_after_seconds


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


def _on_straight_lines(points: tuple[tuple[int, float], ...], x: float) -> float:
    """Between measured sizes on the straight line joining their figures, beyond them on the
    line through the two nearest. Not one line through all: the measured ones do not lie on
    one."""
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1 or (x1, y1) == points[-1]:
            return max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    raise ValueError("at least two measured sizes are needed")


def lock_held_ms(costs: UnitCosts, batch: float) -> float:
    """How long a join batch (or one lane's part of it) holds its chain head."""
    return _on_straight_lines(costs.lock_held_ms, batch)


def lock_ceiling(costs: UnitCosts, batch: float) -> float:
    """Joins a second one chain head lets through, in parts of ``batch``."""
    return batch / lock_held_ms(costs, batch) * 1000


def full_part(scenario: Scenario) -> float:
    """A lane's part of a full batch: a web process's batch (at most ``join_batch``) is split
    by lane, each part committed under its lane's head (queueing/line/joining.py)."""
    return max(1.0, scenario.join_batch / scenario.lanes)


def part_as_formed(costs: UnitCosts, scenario: Scenario, joins: float) -> float:
    """The fans of one lane in one joining web process's batch when no lock is waited for.
    A process commits its batch's parts one after another, and its next batch is what
    arrived meanwhile: so a lane's next part is what the process took of that lane during
    one part's commit, ``rate x wall(part)``, whatever the number of lanes. Waiting for a
    busy lock only makes parts bigger (and cheaper per join)."""
    top = full_part(scenario)
    if scenario.join_processes is None or not costs.part_wall_ms:
        return top
    rate, part = joins / scenario.join_processes, 1.0
    for _ in range(100):  # a contraction: the wall grows far slower than the part
        part = min(top, max(1.0, rate * _on_straight_lines(costs.part_wall_ms, part) / 1000))
    return part


def part_committed(costs: UnitCosts, scenario: Scenario, joins: float) -> float:
    """The part as committed: as it forms, or, where a lane's head could not keep up with
    parts that small, as big as it must be for the head to be held all the time (parts then
    gather while they wait for it: group commit)."""
    small, top = part_as_formed(costs, scenario, joins), full_part(scenario)
    per_lane = joins / scenario.lanes

    def held(part: float) -> float:
        return per_lane / part * lock_held_ms(costs, part) / 1000

    if held(small) <= 1 or held(top) >= 1:
        return small if held(small) <= 1 else top
    low, high = small, top
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if held(middle) > 1 else (low, middle)
    return high


def postgresql_ms_per_join(costs: UnitCosts, part: float) -> float:
    """A join's PostgreSQL backend CPU, committed in parts of ``part``."""
    if not costs.part_postgresql_ms:
        return costs.postgresql_ms_per_join
    return _on_straight_lines(costs.part_postgresql_ms, part) / part


def web_ms_per_join(costs: UnitCosts, part: float) -> float:
    """A join's web CPU: as measured over HTTP, plus what the batch thread spends more per
    join on parts of ``part`` than on the HTTP run's batches (never less than measured)."""
    if not costs.part_thread_ms:
        return costs.web_ms_per_join
    thread = _on_straight_lines(costs.part_thread_ms, part) / part
    measured = _on_straight_lines(costs.part_thread_ms, costs.http_join_batch)
    return costs.web_ms_per_join + max(0.0, thread - measured / costs.http_join_batch)


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
    started: bool  # before the start, a join of a line of lanes takes the root's head too


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
    lane_ceiling = lock_ceiling(costs, full_part(scenario))
    start = round(scenario.start_minute * 60)
    pace = scenario.admissions_per_minute / 60
    ws = scenario.websocket_share
    keep_alive = _keep_alive(scenario.heartbeat_seconds)
    backlog = prequeue = waiting = admitted_total = 0.0
    for t in range(round(limit_hours * 3600)):
        offered = (arrivals[t] if t < len(arrivals) else 0.0) + backlog
        # The chain heads' locks bound the commits: before the start every part takes the
        # root's too (one head for all lanes); then each lane's, and with one lane that one
        # is the root, shared with the admissions' records.
        if t < start:
            room = lane_ceiling
        elif scenario.lanes > 1:
            room = lane_ceiling * scenario.lanes
        else:
            room = lane_ceiling * max(0.0, 1 - pace * costs.lock_ms_per_admitted / 1000)
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
            started=t >= start,
        )
        if scenario.sell_out_after is not None and admitted_total >= scenario.sell_out_after:
            return  # the on-sale closes: later joins are refused, the line is revoked
        if t >= len(arrivals) and backlog < 1 and (waiting < 1 or pace == 0):
            return  # everyone has joined, and the line is empty or never moves
