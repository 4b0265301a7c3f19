"""Positions without the hot index at O(1) per poll (queueing/line/line_snapshots.py): a
snapshot of the line per process and on-sale, at most once a second, and every poll placed on
it in memory, marked approximate and told to come back later."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from events.models import Tier
from queueing.line.layouts import event_layout
from queueing.line.line_snapshots import line_snapshot, snapshots_clear
from queueing.models import QueueEntry
from queueing.rules.line_sketch import CHECKPOINT_RANKS, rank_from_checkpoints
from tests.conftest import join, new_fan
from tests.queueing.test_hot_index import wipe_event

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_snapshots():
    snapshots_clear()
    yield
    snapshots_clear()


def test_a_rank_is_exact_on_a_checkpoint_and_interpolated_between() -> None:
    sketch = [(0, 100), (1, 110), (31, 400), (35, 480), (99, 1000)]
    assert rank_from_checkpoints(sketch, order_key=110, count=100) == 1
    assert rank_from_checkpoints(sketch, order_key=440, count=100) == 33
    assert rank_from_checkpoints(sketch, order_key=481, count=100) == 36  # never a checkpoint's
    assert rank_from_checkpoints(sketch, order_key=5000, count=100) == 100  # joined since
    assert rank_from_checkpoints(sketch, order_key=50, count=100) == 0  # those ahead left
    assert rank_from_checkpoints([], order_key=7, count=0) == 0


def _bulk_line(event, n: int) -> list[QueueEntry]:
    tier = Tier.objects.get(event=event)
    now = timezone.now()
    QueueEntry.objects.bulk_create(
        QueueEntry(
            event=event,
            tier=tier,
            identity=f"bulk{i}",
            status="waiting",
            joined_at=now,
            status_changed_at=now,
        )
        for i in range(n)
    )
    return list(QueueEntry.objects.filter(event=event).order_by("order_key"))


def test_the_snapshot_places_everyone_within_a_checkpoint_gap(event) -> None:
    entries = _bulk_line(event, 2000)
    layout = event_layout(event.id)
    snapshot = line_snapshot(layout)
    assert snapshot.queue_length == 2000
    ranks = {rank for rank, _ in snapshot.tiers[0].checkpoints}
    assert set(range(32)) <= ranks and 1999 in ranks
    assert len(ranks) == len([r for r in CHECKPOINT_RANKS if r < 2000]) + 1
    for true_position, entry in enumerate(entries, start=1):
        placed = snapshot.position(layout, tier_id=entry.tier_id, order_key=entry.order_key)
        if true_position <= 32:
            assert placed == true_position
        else:
            # Within the gap between two checkpoints: ~15% of the rank.
            assert abs(placed - true_position) <= 0.08 * true_position + 1


def test_polls_without_the_index_are_placed_on_the_snapshot(event, redis_client) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(5)]
    normal = Client().get(f"/api/v1/tickets/{tickets[4]}")
    assert normal.json()["approximate"] is False
    wipe_event(redis_client, event.id)
    answers = [Client().get(f"/api/v1/tickets/{t}") for t in tickets]
    assert [a.json()["position"] for a in answers] == [1, 2, 3, 4, 5]
    assert {a.json()["approximate"] for a in answers} == {True}
    assert {a.json()["queue_length"] for a in answers} == {5}
    # Told to come back three times later (position 5: 1 s normally).
    assert float(normal["X-Poll-After-Seconds"]) == 1.0
    assert float(answers[4]["X-Poll-After-Seconds"]) == 3.0


def test_many_polls_take_one_snapshot_a_second(event, redis_client, settings) -> None:
    settings.WR_LINE_SNAPSHOT_SECONDS = 1.0
    _bulk_line(event, 300)
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    wipe_event(redis_client, event.id)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(20):
            for ticket in tickets:
                assert Client().get(f"/api/v1/tickets/{ticket}").status_code == 200
    scans = [q for q in queries.captured_queries if "row_number()" in q["sql"]]
    counts = [q for q in queries.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(scans) == 1  # 60 polls, one look at the line
    assert len(counts) == 1  # and no count of those ahead per poll


def test_a_join_without_the_index_still_says_exactly_where(event, redis_client) -> None:
    for _ in range(3):
        join(new_fan(), event.slug)
    wipe_event(redis_client, event.id)
    line_snapshot(event_layout(event.id))  # a snapshot taken before the next joins
    positions = [join(new_fan(), event.slug).json()["position"] for _ in range(3)]
    assert positions == [4, 5, 6]
