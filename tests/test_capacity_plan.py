"""bench/capacity_plan.py, with its inputs and its line: the arithmetic of the plan, on made-up
unit costs (the measured ones change from run to run), and that the measured file it ships
with still reads."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from bench.capacity_inputs import (
    Box,
    JoinViewCosts,
    Scenario,
    Segment,
    SocketBands,
    UnitCosts,
)
from bench.capacity_line import (
    batch_as_formed,
    batch_committed,
    batch_split,
    full_part,
    identity_draw_us,
    join_views_load,
    keepalive_slot_us,
    lane_held,
    lock_ceiling,
    lock_held_ms,
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
    # The join views of laned lines, by lanes and part size.
    assert costs.join_views is not None and len(costs.join_views.lane_counts_us) >= 2
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


def test_before_the_start_a_lanes_joins_take_only_its_head():
    # The pre-queue's joins of a laned on-sale in queue mode, without an address cap, take
    # their lane's head alone: the root's carries the admissions only (none here).
    result = plan(COSTS, scenario(fans=100_000, lanes=4, join_batch=800, start_minute=1))
    assert result.peaks["joins"].value == pytest.approx(10_000)
    root = "the root chain head: admissions (joins do not take it) / its ceiling"
    assert result.ceilings[root][0] == pytest.approx(0.0)


def test_joins_decided_on_sale_wide_wait_for_the_root():
    # An address cap (or a mode other than queue): every part takes the root's head too,
    # one head's ceiling for all lanes, before and after the start.
    capped = scenario(fans=100_000, lanes=4, join_batch=800, joins_decided_on_sale_wide=True)
    result = plan(COSTS, capped)
    assert result.peaks["joins"].value == pytest.approx(lock_ceiling(COSTS, 200))
    root = "the root chain head: admissions and joins / its ceiling"
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
    one = batch_as_formed(PARTS, scenario(join_processes=1), joins=1_000)
    assert one.fans == pytest.approx(11.0) and one.transactions == 1
    # Eight lanes: a batch of 88, eight parts of 11 (all but about 1e-5 of a part filled).
    eight = batch_as_formed(PARTS, scenario(lanes=8, join_batch=1_600, join_processes=1), 1_000)
    assert eight.fans == pytest.approx(88.0, rel=1e-4)
    assert eight.other_part == pytest.approx(11.0, rel=1e-4)
    assert eight.transactions == pytest.approx(8.0, rel=1e-4)
    # Spread over ten processes, a batch holds the one fan that came.
    assert batch_as_formed(PARTS, scenario(join_processes=10), joins=1_000).fans == 1.0
    # Never more than a full batch.
    assert batch_as_formed(PARTS, scenario(join_processes=1), joins=100_000).fans == 200
    # Unknown joining processes: full batches, full parts.
    assert batch_as_formed(PARTS, scenario(lanes=4), joins=1_000).other_part == pytest.approx(50)


def test_parts_grow_when_a_lanes_head_cannot_keep_up():
    # Parts of one fan each would hold the head 5,000 x 4 ms a second: joins wait, and
    # parts grow until it is held all the time.
    crowded = scenario(join_processes=5_000)
    batch = batch_committed(PARTS, crowded, joins=5_000)
    assert batch.fans > 1
    assert lane_held(PARTS, crowded, 5_000, batch) == pytest.approx(1.0)
    assert 5_000 / batch.fans * lock_held_ms(PARTS, batch.fans) / 1000 == pytest.approx(1.0)
    # A head that keeps up leaves the parts as they form.
    assert batch_committed(PARTS, crowded, joins=100).fans == 1.0
    # One that cannot even in full parts: full parts (the joins beyond it retry).
    assert batch_committed(PARTS, crowded, joins=10_000).fans == 200


def test_small_parts_cost_more_per_join():
    one_lane = scenario()
    assert postgresql_ms_per_join(PARTS, batch_split(one_lane, 1)) == pytest.approx(1.0)
    assert postgresql_ms_per_join(PARTS, batch_split(one_lane, 201)) == pytest.approx(21.0 / 201)
    # The web's: as measured over HTTP, plus the batch thread's excess over its batches.
    web = COSTS.web_ms_per_join
    assert web_ms_per_join(PARTS, one_lane, batch_split(one_lane, 101)) == pytest.approx(web)
    assert web_ms_per_join(PARTS, one_lane, batch_split(one_lane, 1)) == pytest.approx(
        web + 3.0 - 13.0 / 101
    )
    assert web_ms_per_join(PARTS, one_lane, batch_split(one_lane, 201)) == pytest.approx(web)
    # Without parts measured, a join costs the HTTP figures whatever its part.
    assert postgresql_ms_per_join(COSTS, batch_split(one_lane, 1)) == COSTS.postgresql_ms_per_join


# ------------------------------------------------- new fans in one lane, and lingering


def _old_part(costs: UnitCosts, joins_per_process: float, top: float) -> float:
    """The plan's part before new fans were drawn in one lane and batches lingered, restated:
    a lane's part is what its process took during one part's commit, at least one fan."""
    part = 1.0
    for _ in range(100):
        part = min(top, max(1.0, joins_per_process * _straight(costs.part_wall_ms, part) / 1000))
    return part


def _straight(points: tuple[tuple[int, float], ...], x: float) -> float:
    """On the line through two measured points (PARTS has two)."""
    (x0, y0), (x1, y1) = points
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def test_the_default_scenario_is_the_plan_before_new_fans_were_drawn():
    assert scenario().returning_share == 1.0 and scenario().join_linger_ms == 0
    # One lane: the batch is the old part, whatever the rate; its head held as before.
    for joins in (100, 1_000, 5_000, 50_000):
        parted = scenario(join_processes=4)
        part = _old_part(PARTS, joins / 4, 200)
        batch = batch_as_formed(PARTS, parted, joins)
        assert batch.fans == pytest.approx(part, rel=1e-12)
        held = joins / part * lock_held_ms(PARTS, part) / 1000
        assert lane_held(PARTS, parted, joins, batch) == pytest.approx(held, rel=1e-12)
    # Lanes, every fan by hash: the old part where a part holds several fans (all lanes
    # have one), fewer parts than lanes where a batch is about as big as the lanes.
    laned = scenario(lanes=8, join_batch=1_600, join_processes=1)
    assert batch_as_formed(PARTS, laned, 2_000).other_part == pytest.approx(
        _old_part(PARTS, 2_000, 200), rel=1e-3
    )
    few = batch_as_formed(PARTS, laned, 150)
    assert few.fans < 16 and few.transactions < 7 and few.other_part > 1


def test_a_batchs_new_fans_form_one_part():
    laned = scenario(lanes=32, join_batch=6_400)
    # No fan brings an identity: one part, the whole batch, one lane.
    all_new = batch_split(replace(laned, returning_share=0.0), 100)
    assert all_new.transactions == pytest.approx(1.0)
    assert all_new.newcomers_part == pytest.approx(100)
    # Every fan by hash: about 32 (1 - (31/32)^100) parts of 3.
    hashed = batch_split(laned, 100)
    assert hashed.transactions == pytest.approx(32 * (1 - (31 / 32) ** 100))
    # The newcomers' part grows with the share of new fans; the batch's fans are all placed.
    parts = [batch_split(replace(laned, returning_share=r), 100) for r in (0.75, 0.5, 0.25)]
    assert parts[0].newcomers_part < parts[1].newcomers_part < parts[2].newcomers_part
    for batch in parts:
        placed = batch.newcomers_parts * batch.newcomers_part + batch.other_parts * batch.other_part
        assert placed == pytest.approx(100)


def test_lingering_fills_the_parts_and_frees_the_heads():
    # 40 processes at 12,500 joins a second: 312 a second each, 3 ms or so a part.
    base = scenario(lanes=32, join_batch=6_400, join_processes=40, returning_share=0.25)
    held, parts = [], []
    for linger in (0, 25, 50, 100):
        lingering = replace(base, join_linger_ms=linger)
        batch = batch_as_formed(PARTS, lingering, 12_500)
        held.append(lane_held(PARTS, lingering, 12_500, batch))
        parts.append(batch.newcomers_part)
    assert parts == sorted(parts) and parts[-1] > 2 * parts[0]
    assert held == sorted(held, reverse=True) and held[-1] < held[0]
    # The batch is what arrives while it lingers: 312.5 a second for 100 ms.
    batch = batch_as_formed(PARTS, replace(base, join_linger_ms=100), 12_500)
    assert batch.fans == pytest.approx(31.25)


def test_drawing_a_new_identity_costs_the_web_by_its_lanes():
    draws = replace(PARTS, identity_draw_us=((1, 10.0), (8, 20.0), (32, 64.0), (64, 120.0)))
    # Over what a line of one costs (the HTTP runs' joins were new fans of one lane).
    assert identity_draw_us(draws, 1) == 0.0
    assert identity_draw_us(draws, 16) == pytest.approx(20.0 + 44.0 / 3 - 10.0)
    laned = scenario(lanes=32, join_batch=6_400, returning_share=0.25)
    batch = batch_split(laned, 100)
    extra = web_ms_per_join(draws, laned, batch) - web_ms_per_join(PARTS, laned, batch)
    assert extra == pytest.approx(0.75 * 54.0 / 1000)


# Join views: flat by lanes but for the thread's CPU and a view's bytes; per call of n fans,
# lane_counts 20 µs and 1 more a fan past the first, view_write 25 µs and 3 more a fan.
VIEWS = replace(
    PARTS,
    join_views=JoinViewCosts(
        thread_us=((8, ((1, 100.0), (25, 340.0))), (32, ((1, 400.0), (25, 640.0)))),
        wall_us=((8, ((1, 200.0), (25, 440.0))), (32, ((1, 500.0), (25, 740.0)))),
        lane_counts_us=((8, ((1, 20.0), (25, 44.0))), (32, ((1, 20.0), (25, 44.0)))),
        view_write_us=((8, ((1, 25.0), (25, 97.0))), (32, ((1, 25.0), (25, 97.0)))),
        view_bytes=((8, 264.0), (32, 840.0)),
        view_seconds=5.0,
    ),
)


def test_join_views_cost_nothing_at_one_lane():
    one = scenario(join_processes=4)
    assert join_views_load(VIEWS, one, 100, batch_split(one, 25)).slot_cores == 0.0
    with_views, without = plan(VIEWS, one), plan(PARTS, one)
    for name in ("slot_cores", "web_cores", "slot_gb", "join_process_cores"):
        assert with_views.peaks[name].value == pytest.approx(without.peaks[name].value), name


def test_join_views_count_a_batch_once_in_each_lane():
    laned = scenario(lanes=16, join_batch=3_200, join_processes=4, returning_share=0.0)
    # Every fan new: a batch of 13 is one part of 13, counted on the 15 other lanes and
    # written in its own; one batch a second in 16 lanes' slots.
    one_part = batch_split(laned, 13)
    load = join_views_load(VIEWS, laned, 13, one_part)
    assert load.slot_cores == pytest.approx((15 * (20 + 12) + (25 + 36)) / 16 / 1e6)
    # The thread's CPU between the measured lanes (8 and 32), spread over the batch.
    thread = 220.0 + (520.0 - 220.0) * 8 / 24
    assert load.web_ms_per_join == pytest.approx(thread / 13 / 1000)
    # The views kept 5 s, each of 264 + 8 x 576 / 24 bytes, spread over the lanes.
    assert load.slot_bytes == pytest.approx(13 * 5 * (264 + 576 / 3) / 16)
    # The same joins over many lanes are still counted once in each (the batch is answered
    # as a whole, queueing/line/joining.py); only the views' writes go part by part.
    hashed = batch_split(replace(laned, returning_share=1.0), 13)
    spread_out = join_views_load(VIEWS, replace(laned, returning_share=1.0), 13, hashed)
    writes = hashed.summed(lambda part: 25 + 3 * (part - 1))
    assert spread_out.slot_cores == pytest.approx((15 * (20 + 12) + writes) / 16 / 1e6)
    assert spread_out.slot_cores < 2 * load.slot_cores


def test_join_views_are_in_the_plans_slot_and_web():
    laned = scenario(lanes=16, join_batch=3_200, join_processes=4, returning_share=0.05)
    with_views, without = plan(VIEWS, laned), plan(PARTS, laned)
    top = with_views.at_join_peak
    assert top.views_slot_cores > 0 and top.views_web_ms_per_join > 0
    assert with_views.peaks["slot_cores"].value == pytest.approx(
        without.peaks["slot_cores"].value + top.views_slot_cores, rel=0.05
    )
    assert with_views.peaks["web_cores"].value > without.peaks["web_cores"].value
    assert with_views.peaks["slot_gb"].value > without.peaks["slot_gb"].value
    # Before the start the joins are in the pre-queue: no views.
    before = plan(VIEWS, replace(laned, start_minute=1))
    assert before.at_join_peak.views_slot_cores == 0.0


def test_the_fifty_million_on_sale_fits_under_its_target():
    # As committed, with the measured costs: every head, slot, joining process and the
    # primary under the target at the peak; the admissions per tick are the pace chosen.
    costs = UnitCosts.from_measurements(
        json.loads((ROOT / "bench" / "unit_costs.json").read_text())
    )
    on_sale = Scenario.from_json(
        json.loads((ROOT / "bench" / "scenarios" / "onsale_50m_one.json").read_text())
    )
    result = plan(costs, on_sale)
    assert result.peaks["joins"].value == pytest.approx(100_000)
    for name, (used, limit) in result.ceilings.items():
        if name == "admissions per tick":
            assert used / limit <= on_sale.target_utilisation
        else:
            assert used / limit < on_sale.target_utilisation, name


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
