"""Positions without the hot index, at O(1) per poll.

While an on-sale's hot index is missing or being rebuilt (Redis away, or back empty), a poll
cannot ask Redis where its fan stands, and counting the fans ahead in PostgreSQL for every
poll is O(position): at a million fans polling, the database that holds the truth would be
the next thing to fall. Instead each web process keeps, per on-sale, one snapshot of the line
taken from PostgreSQL (counts per tier and the pre-queue, and per tier the same ``(rank, order
key)`` checkpoints a live tick carries), and every poll places its fan on it in memory, as a
page places itself from a tick (``rules/line_sketch.py``, ``rules/positions.py``).

A snapshot is taken at most once a second (``WR_LINE_SNAPSHOT_SECONDS``) per process and
on-sale, and less often for long lines (``SNAPSHOT_SECONDS_PER_FAN``: a million waiting are
looked at every 5 s), since taking one reads the whole line once (an index-only scan of
``entry_waiting_order``). One poll takes it while the others of the process keep answering
from the previous one; at most ``MAX_SNAPSHOTS`` on-sales are kept. Answers from a snapshot
are marked approximate.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import Count

from queueing.models import QueueEntry
from queueing.rules.layout import EventLayout
from queueing.rules.line_sketch import CHECKPOINT_RANKS, rank_from_checkpoints
from queueing.rules.positions import position_in_line
from queueing.rules.states import EntryStatus

SNAPSHOT_SECONDS_PER_FAN = 5.0 / 1_000_000
MAX_SNAPSHOTS = 256


@dataclass(frozen=True)
class TierSnapshot:
    tier_id: int
    count: int
    checkpoints: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LineSnapshot:
    prequeue: int
    tiers: tuple[TierSnapshot, ...]  # the layout's tiers, in its order

    @property
    def queue_length(self) -> int:
        return self.prequeue + sum(tier.count for tier in self.tiers)

    def position(self, layout: EventLayout, *, tier_id: int, order_key: int) -> int:
        """Where a waiting fan stands, placed on the snapshot (approximate)."""
        mine = next((t for t in self.tiers if t.tier_id == tier_id), None)
        rank = 0
        if mine is not None:
            rank = rank_from_checkpoints(mine.checkpoints, order_key=order_key, count=mine.count)
        return position_in_line(
            layout,
            tier_id=tier_id,
            rank_in_tier=rank,
            tier_counts=[tier.count for tier in self.tiers],
        )


def _checkpoints(event_id: int, tier_id: int, count: int) -> tuple[tuple[int, int], ...]:
    ranks = [rank for rank in CHECKPOINT_RANKS if rank < count]
    if count and ranks[-1] != count - 1:
        ranks.append(count - 1)  # the last fan: everyone after joined after the snapshot
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rn, order_key FROM (SELECT order_key, "
            "row_number() OVER (ORDER BY order_key) - 1 AS rn "
            f"FROM {QueueEntry._meta.db_table} "
            "WHERE event_id = %s AND tier_id = %s AND status = %s) AS line "
            "WHERE rn = ANY(%s) ORDER BY rn",
            [event_id, tier_id, EntryStatus.WAITING.value, ranks],
        )
        return tuple((int(rank), int(key)) for rank, key in cursor.fetchall())


def snapshot_seconds(snapshot: LineSnapshot) -> float:
    """How long a snapshot serves: a second (``WR_LINE_SNAPSHOT_SECONDS``), more for long
    lines; 0 (tests) takes one per poll."""
    least = settings.WR_LINE_SNAPSHOT_SECONDS
    return max(least, snapshot.queue_length * SNAPSHOT_SECONDS_PER_FAN) if least else 0.0


def snapshot_take(layout: EventLayout) -> LineSnapshot:
    """Read the line from PostgreSQL: one grouped count, then one scan per tier in line."""
    waiting: dict[int, int] = {}
    prequeue = 0
    for status, tier_id, n in (
        QueueEntry.objects.filter(
            event_id=layout.event_id, status__in=[EntryStatus.WAITING, EntryStatus.PREQUEUE]
        )
        .order_by()
        .values_list("status", "tier_id")
        .annotate(n=Count("id"))
    ):
        if status == EntryStatus.PREQUEUE:
            prequeue += n
        else:
            waiting[tier_id] = n
    tiers = tuple(
        TierSnapshot(
            tier_id=tier.id,
            count=waiting.get(tier.id, 0),
            checkpoints=_checkpoints(layout.event_id, tier.id, waiting[tier.id])
            if waiting.get(tier.id)
            else (),
        )
        for tier in layout.tiers
    )
    return LineSnapshot(prequeue=prequeue, tiers=tiers)


@dataclass
class _Kept:
    """One on-sale's snapshot in this process, and whether a poll is taking the next."""

    snapshot: LineSnapshot | None = None
    fresh_until: float = 0.0
    taking: bool = False


_kept: OrderedDict[int, _Kept] = OrderedDict()
_lock = threading.Condition()
FIRST_WAIT_SECONDS = 10.0


def line_snapshot(layout: EventLayout) -> LineSnapshot:
    """This process's snapshot of the on-sale's line, taken anew when it is due. While one
    poll takes it, the others answer from the previous one; before the first exists, they
    wait for it rather than each reading the line."""
    with _lock:
        kept = _kept.get(layout.event_id)
        if kept is None:
            kept = _kept[layout.event_id] = _Kept()
            while len(_kept) > MAX_SNAPSHOTS:
                _kept.popitem(last=False)
        _kept.move_to_end(layout.event_id)
        if kept.snapshot is None and kept.taking:
            _lock.wait_for(lambda: not kept.taking, timeout=FIRST_WAIT_SECONDS)
        if kept.taking or time.monotonic() < kept.fresh_until:
            if kept.snapshot is not None:
                return kept.snapshot
        kept.taking = True
    snapshot = None
    try:
        snapshot = snapshot_take(layout)
    finally:
        with _lock:
            kept.taking = False
            if snapshot is not None:
                kept.snapshot = snapshot
                kept.fresh_until = time.monotonic() + snapshot_seconds(snapshot)
            _lock.notify_all()
    return snapshot


def snapshots_clear() -> None:
    with _lock:
        _kept.clear()
