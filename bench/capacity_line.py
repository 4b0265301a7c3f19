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
