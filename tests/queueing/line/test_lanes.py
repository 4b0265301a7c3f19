"""A line split in lanes is one line: admission takes the lanes' fans in order-key order (no
inversion across lanes), and each fan is told everyone ahead in every lane, counted in their
own lane and read from the other lanes' summary: never off by more than max(10, 1 %)."""

import random

import pytest
from django.utils import timezone

from dashboard.reports import event_fairness
from queueing.hot import keys, line_index
from queueing.line.expiry import heartbeat
from queueing.line.index_sync import hot_index_rebuild
from queueing.line.joining import JoinRequest, JoinResult, entry_join_many
from queueing.line.lanes import lanes_summary_publish
from queueing.line.reads import event_layout
from queueing.models import AuditRecord, QueueEntry
from queueing.records.entry_reads import IN_ORDER
from queueing.rules.lanes import lane_of
from queueing.rules.layout import position_in_line
from staff.services import TierSpec
from tests.helpers import entry_of, poll, tick

pytestmark = pytest.mark.django_db


def _join(event, identities):
    now = timezone.now()
    outcomes = entry_join_many(
        [JoinRequest(event=event, identity=i, access_code=None, now=now) for i in identities]
    )
    assert all(isinstance(o, JoinResult) for o in outcomes)
    return [o.answer.ticket for o in outcomes]


def test_fans_land_in_every_lane_and_admission_merges_them_in_order(make_event) -> None:
    event = make_event(lanes=4, capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    _join(event, [f"fan-{i}" for i in range(200)])
    lanes = set(QueueEntry.objects.filter(event=event).values_list("lane", flat=True))
    assert lanes == {0, 1, 2, 3}
    assert {
        e.lane
        for e in QueueEntry.objects.filter(event=event)
        if e.lane != lane_of(e.identity, lanes=4)
    } == set()
    admitted = 0
    while admitted < 200:
        outcome = tick(event)
        assert outcome.admitted, "admission stalled"
        admitted += len(outcome.admitted)
    keys_in_admission_order = [
        r.data["order_key"]
        for r in AuditRecord.objects.filter(event=event, action="admitted").order_by("seq")
    ]
    assert keys_in_admission_order == sorted(keys_in_admission_order)
    assert event_fairness(event).order_inversions == 0
    # Everyone left every lane's index.
    layout = event_layout(event.id)
    assert line_index.line_counts(layout).waiting == 0


def test_a_fan_is_found_in_their_own_lanes_keys(make_event, redis_client) -> None:
    event = make_event(lanes=8, capacity=0, rate_per_minute=0)
    tickets = _join(event, [f"fan-{i}" for i in range(40)])
    tier = event.tiers.get()
    for entry in QueueEntry.objects.filter(event=event):
        assert redis_client.zscore(keys.tier_queue(event.id, tier.id, entry.lane), entry.id)
        others = [lane for lane in range(8) if lane != entry.lane]
        for lane in others:
            assert redis_client.zscore(keys.tier_queue(event.id, tier.id, lane), entry.id) is None
    # Places follow the order keys (joins at once have no order among them: a batch
    # commits lane by lane).
    by_key = sorted(tickets, key=lambda t: entry_of(t).order_key)
    assert [poll(t)["position"] for t in by_key] == list(range(1, 41))


def _generated_line(event, tiers, count: int, seed: int) -> None:
    rng = random.Random(seed)
    now = timezone.now()
    QueueEntry.objects.bulk_create(
        QueueEntry(
            event=event,
            tier=tiers[0] if rng.random() < 0.1 else tiers[1],
            identity=f"gen-{seed}-{i}",
            lane=lane_of(f"gen-{seed}-{i}", lanes=event.lanes),
            status="waiting",
            joined_at=now,
            status_changed_at=now,
        )
        for i in range(count)
    )


@pytest.mark.parametrize(("lanes", "count", "seed"), [(4, 6000, 1), (8, 20_000, 2), (3, 2500, 3)])
def test_positions_across_lanes_stay_within_the_bound(
    make_event, settings, lanes, count, seed
) -> None:
    event = make_event(
        lanes=lanes,
        heartbeat_seconds=3600,
        tiers=[TierSpec("VIP", priority=1, access_codes=["VIP"]), TierSpec("General")],
    )
    settings.WR_LANES_SUMMARY_SECONDS = 60  # the summary the tick published, as every poll reads it
    settings.WR_LANES_SUMMARY_STALE_SECONDS = 60
    tiers = list(event.tiers.order_by("priority"))
    _generated_line(event, tiers, count, seed)
    assert hot_index_rebuild(event_id=event.id)
    layout = event_layout(event.id, fresh=True)
    assert lanes_summary_publish(layout, ttl_seconds=60) is not None
    now = timezone.now()
    rng = random.Random(seed)
    in_order = {
        tier.id: list(
            QueueEntry.objects.filter(IN_ORDER, event=event, tier=tier)
            .order_by("order_key")
            .values_list("id", "lane", "order_key")
        )
        for tier in tiers
    }
    counts = [len(in_order[tier.id]) for tier in layout.tiers]
    approximate = 0
    for tier in layout.tiers:
        line = in_order[tier.id]
        for rank in sorted(rng.sample(range(len(line)), min(300, len(line)))):
            entry_id, lane, _ = line[rank]
            placement = heartbeat(layout, member=entry_id, tier_id=tier.id, now=now, lane=lane)
            # Said whole when it fails: once (a loaded two-worker run on the cluster) a fan of
            # a ready index was not found in its lane, which no lone run has shown again.
            assert placement is not None and placement.rank is not None, (entry_id, lane, placement)
            exact = position_in_line(layout, tier_id=tier.id, rank_in_tier=rank, tier_counts=counts)
            told = position_in_line(
                layout,
                tier_id=tier.id,
                rank_in_tier=placement.rank,
                tier_counts=placement.counts.tiers,
            )
            assert abs(told - exact) <= max(10, exact // 100), (rank, told, exact)
            assert placement.counts.tiers == tuple(counts)
            if placement.approximate:
                approximate += 1
            else:
                assert told == exact
    assert approximate > 0  # the bound was put to the test, not only exact answers


def test_a_tick_of_a_laned_line_sketches_the_whole_line(make_event, settings) -> None:
    from queueing.live.ticks import tick_payload

    event = make_event(lanes=8, heartbeat_seconds=3600)
    tier = event.tiers.get()
    _generated_line(event, [tier, tier], 3000, 5)
    assert hot_index_rebuild(event_id=event.id)
    layout = event_layout(event.id, fresh=True)
    payload = tick_payload(event, layout, now=timezone.now())
    assert payload is not None and payload["queue_length"] == 3000
    (sketch,) = payload["tiers"]
    assert sketch["count"] == 3000
    keys_in_order = list(
        QueueEntry.objects.filter(event=event)
        .order_by("order_key")
        .values_list("order_key", flat=True)
    )
    points = sketch["checkpoints"]
    assert [r for r, _ in points] == sorted({r for r, _ in points})
    assert [k for _, k in points] == sorted(k for _, k in points)
    # The front is exact (every lane's front is counted), the rest within the bound.
    assert points[:32] == [[rank, keys_in_order[rank]] for rank in range(32)]
    for rank, key in points:
        exact = keys_in_order.index(key)
        assert abs(rank - exact) <= max(10, exact // 100)
    assert points[-1] == [2999, keys_in_order[-1]]
    # Every process then places its polls from the summary the tick kept.
    assert line_index.lanes_summary_read(event.id) is not None
