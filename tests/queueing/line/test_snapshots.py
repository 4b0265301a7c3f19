"""Snapshots of the line for positions without the hot index (queueing/line/snapshots.py):
what one holds, how near it places every fan, and that a process reads one at most once a
second per on-sale however many polls ask."""

from __future__ import annotations

import itertools
import random
import threading
import time

import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from queueing import in_process
from queueing.line import snapshots
from queueing.line.reads import event_layout
from queueing.line.snapshots import FRONT, bucket_bounds, line_snapshot, tier_from_buckets
from queueing.models import QueueEntry
from queueing.rules.layout import position_in_line
from staff.services import TierSpec
from tests.helpers import waiting_entries

pytestmark = pytest.mark.django_db


def waiting_line(event, tier, count: int, *, prefix: str = "f") -> None:
    waiting_entries(event, tier, count, prefix=prefix)


def test_buckets_start_at_the_end_of_the_front_and_grow() -> None:
    bounds = bucket_bounds(first=1000, front_end=1032, last=1_000_000)
    assert bounds[0] == 1032
    assert bounds == sorted(set(bounds))
    assert bounds[-1] <= 1_000_000
    gaps = [b - a for a, b in itertools.pairwise(bounds)]
    assert max(gaps) <= (1_000_000 - 1032) / 128 + 1  # evenly spread ones bound every gap
    assert 200 < len(bounds) < 500


def test_a_tier_from_its_buckets_has_a_checkpoint_at_each_ones_first_and_last() -> None:
    tier = tier_from_buckets(5, [10, 11], [(3, 20, 29), (1, 40, 40), (2, 50, 51)])
    assert tier.count == 8
    assert tier.checkpoints == (
        (0, 10),
        (1, 11),
        (2, 20),
        (4, 29),
        (5, 40),
        (6, 50),
        (7, 51),
    )


def test_a_snapshot_places_every_fan_near_their_place_and_the_front_exactly(make_event) -> None:
    event = make_event(
        tiers=[
            TierSpec(name="Club", priority=10, share=2),
            TierSpec(name="All", priority=10, share=1),
        ]
    )
    club, everyone = event.tiers.order_by("priority", "id")
    waiting_line(event, everyone, 1500, prefix="a")
    waiting_line(event, club, 400, prefix="c")
    waiting_line(event, everyone, 1500, prefix="b")
    # Gaps in the keys, as admissions and departures leave them.
    rng = random.Random(7)
    ids = list(QueueEntry.objects.filter(event=event).values_list("id", flat=True))
    QueueEntry.objects.filter(pk__in=rng.sample(ids, 600)).update(
        status="left", ended_at=timezone.now()
    )
    layout = event_layout(event.id)
    snapshot = line_snapshot(layout)

    keys = {
        tier.id: list(
            QueueEntry.objects.filter(tier=tier, status="waiting")
            .order_by("order_key")
            .values_list("order_key", flat=True)
        )
        for tier in (club, everyone)
    }
    counts = tuple(len(keys[tier.id]) for tier in layout.tiers)
    assert snapshot.counts(layout).tiers == counts
    assert snapshot.waiting == sum(counts)
    worst = 0.0
    for tier_id, tier_keys in keys.items():
        mine = next(t for t in snapshot.tiers if t.tier_id == tier_id)
        on_checkpoints = {key for _, key in mine.checkpoints}
        for rank, key in enumerate(tier_keys):
            placed = snapshot.position(layout, tier_id=tier_id, order_key=key)
            exact = position_in_line(layout, tier_id=tier_id, rank_in_tier=rank, tier_counts=counts)
            assert placed.exact == (key in on_checkpoints)
            if rank < FRONT or placed.exact:
                assert placed.exact
                assert placed.position == exact
            worst = max(worst, abs(placed.position - exact) / exact)
    assert worst <= 0.05


def test_a_fan_who_joined_after_the_snapshot_is_placed_behind_everyone(make_event) -> None:
    event = make_event()
    tier = event.tiers.get()
    waiting_line(event, tier, 100)
    layout = event_layout(event.id)
    snapshot = line_snapshot(layout)
    waiting_line(event, tier, 1, prefix="late")
    late = QueueEntry.objects.get(identity="late0")
    placed = snapshot.position(layout, tier_id=tier.id, order_key=late.order_key)
    assert (placed.position, placed.exact) == (101, False)


@pytest.mark.django_db(transaction=True)  # the threads read what the test wrote
def test_a_process_reads_a_snapshot_at_most_once_a_second_however_many_ask(
    make_event, settings, monkeypatch
) -> None:
    settings.WR_DEGRADED_SNAPSHOT_SECONDS = 1.0
    event = make_event()
    waiting_line(event, event.tiers.get(), 200)
    layout = event_layout(event.id)
    reads: list[float] = []
    real = snapshots.snapshot_take

    def counted(asked):
        reads.append(time.monotonic())
        time.sleep(0.05)  # a read that takes a while: others ask meanwhile
        return real(asked)

    monkeypatch.setattr(snapshots, "snapshot_take", counted)
    # Many threads at once (web requests), and within them one connection each.
    failures: list[BaseException] = []

    def ask(times: int) -> None:
        try:
            for _ in range(times):
                assert line_snapshot(layout).waiting == 200
                time.sleep(0.01)
        except BaseException as exc:  # noqa: BLE001
            failures.append(exc)
        finally:
            connection.close()

    started = time.monotonic()
    threads = [threading.Thread(target=ask, args=(60,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    assert not failures, failures[0]
    assert 1 <= len(reads) <= int(elapsed) + 1
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(reads))


def test_a_snapshot_is_a_few_queries_whatever_the_size_of_the_line(make_event) -> None:
    event = make_event()
    waiting_line(event, event.tiers.get(), 2000)
    layout = event_layout(event.id)
    with CaptureQueriesContext(connection) as queries:
        line_snapshot(layout)
    statements = [q["sql"] for q in queries.captured_queries]
    # SET LOCAL, the front, the last, the buckets, the pre-queue (and the savepoint's own).
    assert sum("queueing_queueentry" in sql for sql in statements) == 4


def test_a_read_that_hangs_elsewhere_makes_the_line_unavailable_not_a_bug(
    make_event, monkeypatch
) -> None:
    """Another thread's read of the snapshot holds its claim past the wait: the poll is
    answered 503 (the middleware's OperationalError), not 500."""
    event = make_event()
    layout = event_layout(event.id)
    monkeypatch.setattr(snapshots, "WAIT_SECONDS", 0.01)
    in_process.clear_all()
    assert snapshots._snapshots.claim(event.id) is None  # a read under way that never ends
    try:
        with pytest.raises(OperationalError):
            line_snapshot(layout)
    finally:
        snapshots._snapshots._release(event.id)
