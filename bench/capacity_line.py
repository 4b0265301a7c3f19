"""The line of the capacity plan (bench/capacity_plan.py), second by second: joins as the audit
chain head lets them through, the pre-queue, admissions, and the polls and sockets of everyone
in line; and what a poll, a socket and a join batch cost on a line of a given length.

Pure. The poll interval is the room's own rule (queueing/rules/layout.py), imported rather
than restated.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

from bench.capacity_inputs import ByLanesAndPart, Scenario, UnitCosts
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
    """A lane's part of a full batch of fans who land by hash: a web process's batch (at most
    ``join_batch``) is split by lane, each part committed under its lane's head
    (queueing/line/joining.py)."""
    return max(1.0, scenario.join_batch / scenario.lanes)


@dataclass(frozen=True)
class Batch:
    """A joining web process's batch of ``fans``, as its lanes split it. Its new fans (no
    identity brought) are all drawn in one lane, the batch's newcomers' lane, whose part also
    holds the returning fans hashed there; the other returning fans land by hash over the
    other lanes. Counts are expected values: a part of no fan is no transaction."""

    fans: float
    newcomers_parts: float  # 0 to 1: the newcomers' lane's part, when it has a fan
    newcomers_part: float  # its fans, when it has any
    other_parts: float  # the other lanes' parts that have a fan
    other_part: float  # the fans of each of those

    @property
    def transactions(self) -> float:
        return self.newcomers_parts + self.other_parts

    def summed(self, per_part: Callable[[float], float]) -> float:
        """``per_part``, of a part's size, summed over the batch's parts."""
        total = 0.0
        if self.newcomers_parts > 0:
            total += self.newcomers_parts * per_part(self.newcomers_part)
        if self.other_parts > 0:
            total += self.other_parts * per_part(self.other_part)
        return total


def batch_split(scenario: Scenario, fans: float) -> Batch:
    """A batch of ``fans`` split by lane. Each fan is returning with probability r and then
    in any one lane with probability 1/lanes: another lane's part is empty with probability
    (1 - r/lanes)^fans, the newcomers' lane's with (r (1 - 1/lanes))^fans. (For many lanes
    and no new fans, lanes x (1 - e^(-fans/lanes)) parts; with one lane, one part.)"""
    lanes, r = scenario.lanes, scenario.returning_share
    returning = fans * r
    newcomers_parts = 1 - (r * (1 - 1 / lanes)) ** fans
    other_parts = (lanes - 1) * (1 - (1 - r / lanes) ** fans)
    in_newcomers_lane = fans * (1 - r) + returning / lanes
    return Batch(
        fans=fans,
        newcomers_parts=newcomers_parts,
        newcomers_part=in_newcomers_lane / newcomers_parts if newcomers_parts > 0 else 0.0,
        other_parts=other_parts,
        other_part=(returning - returning / lanes) / other_parts if other_parts > 0 else 0.0,
    )


def batch_wall_ms(costs: UnitCosts, batch: Batch, *, lanes: int = 1, views: bool = False) -> float:
    """A batch's commit, its parts one after another in the process's one batch thread,
    then its fans' join views where ``views`` (a laned line's fans in a tier): counted once
    for the whole batch (queueing/line/joining.py answers its parts together)."""
    wall = batch.summed(lambda part: _on_straight_lines(costs.part_wall_ms, part))
    if views and lanes > 1 and costs.join_views is not None:
        wall += _by_lanes_and_part(costs.join_views.wall_us, lanes, batch.fans) / 1000
    return wall


def batch_as_formed(
    costs: UnitCosts, scenario: Scenario, joins: float, *, views: bool = True
) -> Batch:
    """A joining web process's batch when no lock is waited for: what arrived while the
    batch before it committed, or while it lingered (``join_linger_ms``) if that is longer,
    at most ``join_batch``: ``rate x max(linger, wall(batch))``. Waiting for a busy lock
    only makes batches bigger (and cheaper per join). ``views``: the line has started, so
    a laned line's joins are in a tier and their join views follow each part's commit
    (the pre-queue's joins have none)."""
    if scenario.join_processes is None or not costs.part_wall_ms:
        return batch_split(scenario, float(scenario.join_batch))
    rate, fans = joins / scenario.join_processes, 1.0
    for _ in range(100):  # a contraction: the wall grows far slower than the batch
        batch = batch_split(scenario, fans)
        wall = batch_wall_ms(costs, batch, lanes=scenario.lanes, views=views)
        fans = min(scenario.join_batch, max(1.0, rate * max(scenario.join_linger_ms, wall) / 1000))
    return batch_split(scenario, fans)


def lane_held(costs: UnitCosts, scenario: Scenario, joins: float, batch: Batch) -> float:
    """Seconds a second one lane's head is held by ``joins`` a second in such batches: every
    batch's parts' holds, spread evenly over the lanes (the newcomers' lane turns with every
    batch, from a place of its own in each process)."""
    holds = batch.summed(lambda part: lock_held_ms(costs, part))
    return joins / batch.fans * holds / scenario.lanes / 1000


def batch_committed(
    costs: UnitCosts, scenario: Scenario, joins: float, *, views: bool = True
) -> Batch:
    """The batch as committed: as it forms, or, where a lane's head could not keep up with
    its parts, as big as it must be for the heads to be held all the time. Waiting for a
    head lengthens the batch thread's commit, and its next batch is what arrived meanwhile,
    so the whole batch grows, its newcomers' part and its other parts alike (group commit).
    Only the costs of a head held all the time follow from this: the head is then full,
    over any target, which the held time of the batch as formed says."""
    small = batch_as_formed(costs, scenario, joins, views=views)
    top = batch_split(scenario, float(scenario.join_batch))

    def held(batch: Batch) -> float:
        return lane_held(costs, scenario, joins, batch)

    if held(small) <= 1 or held(top) >= 1:
        return small if held(small) <= 1 else top
    low, high = small.fans, top.fans
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if held(batch_split(scenario, middle)) > 1 else (low, middle)
    return batch_split(scenario, high)


def postgresql_ms_per_join(costs: UnitCosts, batch: Batch) -> float:
    """A join's PostgreSQL backend CPU, committed in such a batch's parts."""
    if not costs.part_postgresql_ms:
        return costs.postgresql_ms_per_join
    return batch.summed(lambda part: _on_straight_lines(costs.part_postgresql_ms, part)) / (
        batch.fans
    )


def identity_draw_us(costs: UnitCosts, lanes: int) -> float:
    """What drawing a new identity in a line of ``lanes`` costs its web process more than in
    a line of one (the HTTP runs' joins were each a new identity in a line of one, so their
    web CPU holds that): between measured lane counts on the straight line joining them."""
    if len(costs.identity_draw_us) < 2:
        return 0.0
    draw = _on_straight_lines(costs.identity_draw_us, lanes)
    return max(0.0, draw - _on_straight_lines(costs.identity_draw_us, 1))


def web_ms_per_join(costs: UnitCosts, scenario: Scenario, batch: Batch) -> float:
    """A join's web CPU: as measured over HTTP, plus what the batch thread spends more per
    join on such a batch's parts than on the HTTP run's batches (never less than measured),
    plus, for a new fan's share of the joins, drawing their identity in the batch's lane."""
    draw = (1 - scenario.returning_share) * identity_draw_us(costs, scenario.lanes) / 1000
    if not costs.part_thread_ms:
        return costs.web_ms_per_join + draw
    thread = batch.summed(lambda part: _on_straight_lines(costs.part_thread_ms, part))
    measured = _on_straight_lines(costs.part_thread_ms, costs.http_join_batch)
    excess = thread / batch.fans - measured / costs.http_join_batch
    return costs.web_ms_per_join + max(0.0, excess) + draw


def _by_lanes_and_part(table: ByLanesAndPart, lanes: int, part: float) -> float:
    """A figure measured by lanes and by part size: at each measured number of lanes on the
    straight lines between part sizes, then between those numbers of lanes likewise."""
    at_lanes = tuple((n, _on_straight_lines(parts, part)) for n, parts in table)
    if len(at_lanes) == 1:
        return at_lanes[0][1]
    return _on_straight_lines(at_lanes, lanes)


@dataclass(frozen=True)
class ViewsLoad:
    """What a laned line's join views (queueing/line/join_views.py) cost a second."""

    web_ms_per_join: float  # the batch thread's CPU, spread over the batch's fans
    slot_cores: float  # each lane's Redis slot: other lanes' parts' counts, its own views
    slot_bytes: float  # each lane's slot: the views kept


def join_views_load(costs: UnitCosts, scenario: Scenario, joins: float, batch: Batch) -> ViewsLoad:
    """``joins`` a second into a started line, in such batches. Once a batch's parts are
    committed, the batch thread counts its fans in every lane but their own (one
    ``lane_counts`` script on each: its ZCARDs and a ZCOUNT per fan asked; taken as the
    whole batch's on ``lanes - 1`` of them, a bound: each lane is asked only of the fans not
    in it) and writes their views in each part's own lane (one ``view_write`` a part), kept
    ``view_seconds``. The newcomers' lane turns with every batch and returning fans land by
    hash, so every slot takes its share of both. Nothing at one lane."""
    views, lanes = costs.join_views, scenario.lanes
    if views is None or lanes <= 1 or joins <= 0:
        return ViewsLoad(0.0, 0.0, 0.0)

    def per_batch(table: ByLanesAndPart) -> float:
        return batch.summed(lambda part: _by_lanes_and_part(table, lanes, part))

    batches = joins / batch.fans
    counted = _by_lanes_and_part(views.lane_counts_us, lanes, batch.fans) * (lanes - 1)
    written = per_batch(views.view_write_us)
    view_bytes = (
        _on_straight_lines(views.view_bytes, lanes)
        if len(views.view_bytes) > 1
        else views.view_bytes[0][1]
    )
    return ViewsLoad(
        web_ms_per_join=_by_lanes_and_part(views.thread_us, lanes, batch.fans) / batch.fans / 1000,
        slot_cores=batches * (counted + written) / lanes / 1e6,
        slot_bytes=joins * views.view_seconds * view_bytes / lanes,
    )


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
    started: bool


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
        # The chain heads' locks bound the commits: each lane's, and with one lane that one
        # is the root, shared with the admissions' records. A laned on-sale's parts take the
        # root's head too only when a join decides something for the whole on-sale (an
        # address cap, a mode other than queue): then one head for all lanes. The
        # pre-queue's joins need only their lane's (the start takes every lane's head).
        if scenario.lanes > 1 and scenario.joins_decided_on_sale_wide:
            room = lane_ceiling
        elif scenario.lanes > 1:
            room = lane_ceiling * scenario.lanes
        elif t < start:
            room = lane_ceiling  # no admissions before the start
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
