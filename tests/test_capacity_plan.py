"""bench/capacity_plan.py, with its inputs and its line: the arithmetic of the plan, on made-up
unit costs (the measured ones change from run to run), and that the measured file it ships
with still reads."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from bench.capacity_inputs import Box, Scenario, Segment, SocketBands, UnitCosts
from bench.capacity_line import (
    full_part,
    keepalive_slot_us,
    lock_ceiling,
    lock_held_ms,
    part_as_formed,
    part_committed,
    poll_slot_us,
    polls_per_second,
    postgresql_ms_per_join,
    web_ms_per_join,
)
from bench.capacity_plan import plan
from queueing.rules.layout import poll_after_seconds

ROOT = Path(__file__).resolve().parent.parent

COSTS = UnitCosts(
    web_ms_per_join=1.0,
    postgresql_ms_per_join=0.5,
    slot_us_per_join=20.0,
    redis_us_per_join=120.0,
    web_us_per_poll=250.0,
    slot_us_per_poll=25.0,
    poll_line=1_000,
    web_us_per_socket_second=30.0,
    slot_us_per_socket_second=0.0,
    socket_line=1_000,
    keepalive_refresh_s=5.0,
    # Flat: Redis's costs do not grow with the line here (one test makes them grow).
    by_line=((1_000, 10.0, 0.5), (1_000_000, 10.0, 0.5)),
    kib_per_socket=36.0,
    web_process_mib=100.0,
    lock_held_ms=((1, 4.0), (200, 34.0), (500, 104.0)),
    lock_ms_per_admitted=0.0,
    admission_ms_per_500=200.0,
    handover_ms=0.0,
    worker_ms_per_tick=60.0,
    tick_admitted=100.0,
    slot_us_per_tick=0.0,
    dispatch_ms_per_on_sale=1.0,
    entry_bytes=700.0,
    audit_bytes=500.0,
    redis_bytes_per_fan=190.0,
)


def scenario(**changes) -> Scenario:
    """1,000 fans in 10 s, nobody admitted, all polling."""
    base = Scenario(
        name="small",
        fans=1_000,
        arrivals=(Segment(minutes=10 / 60, share=1.0),),
        start_minute=0,
        admissions_per_minute=0,
        sell_out_after=None,
        websocket_share=0.0,
        heartbeat_seconds=60,
        join_batch=200,
        admission_batch=500,
        revoke_per_second=20800,
        audit_records_per_fan=2,
        audit_records_per_admitted=1,
        web=Box(cores=10, memory_gib=100),
        postgresql=Box(cores=10, memory_gib=100),
        worker=Box(cores=1, memory_gib=8),
        redis=Box(cores=1, memory_gib=32),
        target_utilisation=0.5,
    )
    return replace(base, **changes)


def test_the_chain_head_ceiling_follows_the_measured_holds():
    # Between measured sizes, on the line joining them; beyond, on the last two's line.
    assert lock_held_ms(COSTS, 100) == pytest.approx(4.0 + 30.0 * 99 / 199)
    assert lock_held_ms(COSTS, 800) == pytest.approx(104.0 + 70.0 / 300 * 300)
    assert lock_ceiling(COSTS, 1) == pytest.approx(250.0)
    assert lock_ceiling(COSTS, 200) == pytest.approx(200 / 0.034)
    # A bigger batch lets fewer joins through when its hold grows faster than its size.
    assert lock_ceiling(COSTS, 500) < lock_ceiling(COSTS, 200)


def test_polls_per_second_sums_the_rooms_poll_interval():
    waiting = 2_000
    expected = sum(
        1 / poll_after_seconds(heartbeat_seconds=60, position=k) for k in range(1, waiting + 1)
    )
    assert polls_per_second(waiting, 60) == pytest.approx(expected)


def test_machines_are_the_peak_over_what_one_gives_at_the_target():
    result = plan(COSTS, scenario())
    # 100 joins a second for 10 s, far below the chain head's ceiling: none retries.
    assert result.peaks["joins"].value == pytest.approx(100.0)
    assert result.peaks["backlog"].value == pytest.approx(0.0)
    # The last second: 100 joins and the polls of the 1,000 fans then in line.
    web = 100 * 1.0 / 1e3 + polls_per_second(1_000, 60) * 250 / 1e6
    assert result.peaks["web_cores"].value == pytest.approx(web)
    assert result.machines["web"] == math.ceil(web / (10 * 0.5))
    assert result.storage["entries"] == pytest.approx(1_000)
    assert result.storage["postgresql_gb"] == pytest.approx((1_000 * 700 + 2_000 * 500) / 1e9)


def test_joins_beyond_the_chain_head_retry_and_it_is_the_bottleneck():
    # 100,000 fans in 10 s: 10,000 a second against a ceiling of about 5,900.
    result = plan(COSTS, scenario(fans=100_000))
    ceiling = lock_ceiling(COSTS, 200)
    assert result.peaks["joins"].value == pytest.approx(ceiling)
    assert result.peaks["backlog"].value > 0
    assert result.last_join_minute * 60 >= 100_000 / ceiling - 1
    assert result.bottleneck.startswith("audit chain head")


def test_the_measured_costs_read():
    data = json.loads((ROOT / "bench" / "unit_costs.json").read_text())
    costs = UnitCosts.from_measurements(data)
    assert costs.web_ms_per_join > 0 and costs.kib_per_socket > 0
    assert len(costs.lock_held_ms) >= 2
    # Since issue 30: the parts' costs and the far-back pages' tick bands.
    assert len(costs.part_wall_ms) >= 2 and len(costs.part_postgresql_ms) >= 2
    assert costs.bands is not None and costs.bands.fixed_us > 0


def test_several_on_sales_add_machines_not_ceilings():
    one, ten = plan(COSTS, scenario()), plan(COSTS, scenario(on_sales=10))
    assert ten.storage["entries"] == pytest.approx(10 * one.storage["entries"])
    assert ten.machines["web"] == math.ceil(10 * one.peaks["web_cores"].value / (10 * 0.5))
    lock = "audit chain head: joins / its ceiling in full parts"
    assert ten.ceilings[lock] == one.ceilings[lock]


def test_redis_costs_grow_with_the_log_of_the_line():
    costs = replace(COSTS, by_line=((1_000, 10.0, 0.5), (1_000_000, 20.0, 2.0)))
    # Measured on a line of 1,000: as measured there, more on longer lines, by log size.
    assert poll_slot_us(costs, 1_000) == pytest.approx(25.0)
    assert poll_slot_us(costs, 1_000_000) == pytest.approx(35.0)
    assert poll_slot_us(costs, math.sqrt(1e9)) == pytest.approx(30.0)
    assert poll_slot_us(costs, 1e9) == pytest.approx(45.0)  # past the last: the same line
    assert keepalive_slot_us(costs, 1_000_000) == pytest.approx(1.5 / 5)


# ---------------------------------------------------------------------------- lanes


def test_lanes_spread_the_slot_and_the_chain_head():
    # 100 joins a second, well within either: the same fans, split four ways.
    one = plan(COSTS, scenario())
    four = plan(COSTS, scenario(lanes=4, join_batch=800))
    assert four.peaks["joins"].value == pytest.approx(one.peaks["joins"].value)
    # Each lane's slot holds a quarter of the joins, polls and sockets (flat costs here).
    assert four.peaks["slot_cores"].value == pytest.approx(one.peaks["slot_cores"].value / 4)
    # Each lane's head takes a quarter of the joins, in parts as full as the one lane's.
    assert full_part(scenario(lanes=4, join_batch=800)) == full_part(scenario()) == 200
    lane = "a lane's audit chain head: joins / its ceiling in full parts"
    assert four.ceilings[lane][0] == pytest.approx(
        one.ceilings["audit chain head: joins / its ceiling in full parts"][0] / 4
    )
    # All the slots together still do all the work.
    assert four.peaks["redis_cores"].value == pytest.approx(one.peaks["redis_cores"].value)


def test_lanes_lift_the_on_sales_join_ceiling():
    # 10,000 joins a second against one head's ceiling of about 5,900.
    one = plan(COSTS, scenario(fans=100_000))
    four = plan(COSTS, scenario(fans=100_000, lanes=4, join_batch=800))
    assert one.peaks["backlog"].value > 0
    assert four.peaks["backlog"].value == pytest.approx(0.0)
    assert four.peaks["joins"].value == pytest.approx(10_000)


def test_a_batch_split_over_lanes_has_smaller_parts():
    # WR_JOIN_BATCH_MAX left at 200: four lanes' parts of 50, each costlier per join.
    split = scenario(lanes=4)
    assert full_part(split) == 50
    result = plan(COSTS, replace(split, fans=300_000))
    assert result.peaks["joins"].value == pytest.approx(4 * lock_ceiling(COSTS, 50))


def test_before_the_start_every_lane_waits_for_the_root():
    # The pre-queue's joins take the root's head too: one head's ceiling for all lanes.
    result = plan(COSTS, scenario(fans=100_000, lanes=4, join_batch=800, start_minute=1))
    assert result.peaks["joins"].value == pytest.approx(lock_ceiling(COSTS, 200))
    root = "the root chain head: admissions and pre-queue joins / its ceiling"
    assert result.ceilings[root][0] == pytest.approx(1.0)


PARTS = replace(
    COSTS,
    # A part's wall time: 10 ms, and 0.1 ms more for each fan.
    part_wall_ms=((1, 10.0), (201, 30.0)),
    part_postgresql_ms=((1, 1.0), (201, 21.0)),
    part_thread_ms=((1, 3.0), (201, 23.0)),
    http_join_batch=101.0,
)


def test_a_part_is_what_a_process_takes_of_a_lane_during_a_commit():
    # 1,000 joins a second on one process: part = 1,000 x (10 + 0.1 (part - 1)) ms = 11.
    for lanes in (1, 8):
        parted = scenario(lanes=lanes, join_batch=200 * lanes, join_processes=1)
        assert part_as_formed(PARTS, parted, joins=1_000) == pytest.approx(11.0)
    # Spread over ten processes, a part holds the one fan that came.
    assert part_as_formed(PARTS, scenario(join_processes=10), joins=1_000) == 1.0
    # Never more than a full batch's part.
    assert part_as_formed(PARTS, scenario(join_processes=1), joins=100_000) == 200
    # Unknown joining processes: full parts.
    assert part_as_formed(PARTS, scenario(lanes=4), joins=1_000) == 50


def test_parts_grow_when_a_lanes_head_cannot_keep_up():
    # Parts of one fan each would hold the head 5,000 x 4 ms a second: joins wait, and
    # parts grow until it is held all the time.
    crowded = scenario(join_processes=5_000)
    part = part_committed(PARTS, crowded, joins=5_000)
    assert part > 1
    assert 5_000 / part * lock_held_ms(PARTS, part) / 1000 == pytest.approx(1.0)
    # A head that keeps up leaves the parts as they form.
    assert part_committed(PARTS, crowded, joins=100) == 1.0
    # One that cannot even in full parts: full parts (the joins beyond it retry).
    assert part_committed(PARTS, crowded, joins=10_000) == 200


def test_small_parts_cost_more_per_join():
    assert postgresql_ms_per_join(PARTS, 1) == pytest.approx(1.0)
    assert postgresql_ms_per_join(PARTS, 201) == pytest.approx(21.0 / 201)
    # The web's: as measured over HTTP, plus the batch thread's excess over its batches.
    assert web_ms_per_join(PARTS, 101) == pytest.approx(COSTS.web_ms_per_join)
    assert web_ms_per_join(PARTS, 1) == pytest.approx(COSTS.web_ms_per_join + 3.0 - 13.0 / 101)
    assert web_ms_per_join(PARTS, 201) == pytest.approx(COSTS.web_ms_per_join)
    # Without parts measured, a join costs the HTTP figures whatever its part.
    assert postgresql_ms_per_join(COSTS, 1) == COSTS.postgresql_ms_per_join


def test_sockets_cost_by_their_tick_band():
    bands = SocketBands(
        front_places=10,
        near_places=100,
        ticks_per_second=(1.0, 0.25, 0.1),
        fixed_us=2.0,
        us_per_tick=20.0,
    )
    # 10 at the front, 90 near, 400 far back, and 500 in the pre-queue (far back too).
    expected = 10 * (2 + 20) + 90 * (2 + 5) + 900 * (2 + 2)
    assert bands.web_us(waiting=500, prequeue=500) == pytest.approx(expected)
    result = plan(replace(COSTS, bands=bands), scenario(websocket_share=1.0))
    flat = plan(COSTS, scenario(websocket_share=1.0))
    # 1,000 sockets: 10 front, 90 near, 900 far; at 30 us each without bands.
    joins = 100 * COSTS.web_ms_per_join / 1e3
    assert result.peaks["web_cores"].value == pytest.approx(joins + expected / 1e6)
    assert flat.peaks["web_cores"].value == pytest.approx(joins + 1_000 * 30 / 1e6)
