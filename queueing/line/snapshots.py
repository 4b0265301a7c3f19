"""The line as PostgreSQL has it, sketched at most once a second per process and on-sale, for
positions while the hot index cannot answer (Redis away, or the index missing or being
rebuilt).

Counting the fans ahead of each poller in PostgreSQL costs O(position) per poll: at a million
fans polling every few seconds, the database that holds the truth would be the next thing to
fall. Instead each process takes a **snapshot** of an on-sale's line when it needs one and
its last is older than ``WR_DEGRADED_SNAPSHOT_SECONDS``: per tier, the count and
``(rank, order key)`` checkpoints, as a live tick carries them. Every poll then places its
fan from the snapshot in memory, by the rule the waiting page places itself from a tick
(``rules/layout.py``, ``position_from_sketch``): exact on a checkpoint, interpolated
between two (the answer then says it is approximate).

A snapshot costs one pass over the on-sale's waiting entries in the partial index behind
admission order (``entry_waiting_order``), counted in buckets whose bounds grow
geometrically from the front: every rank of the first ``FRONT`` exact, then the first and
last fan of each bucket, about ``GROWTH - 1`` apart in rank. One thread or event loop takes
it while the others go on with the previous one; only the very first waits. At most
``REMEMBERED_MAX`` on-sales are kept per process, least recently used first out.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.backends.utils import CursorWrapper

from queueing.hot.line_index import IndexState, LineCounts
from queueing.in_process import PerEventLoop, ProcessCache, closes_old_connections
from queueing.rules.layout import EventLayout, SketchedPosition, position_from_sketch
from queueing.rules.states import EntryStatus

# Every rank of the first FRONT of a tier is a checkpoint (fans near the front are told
# their exact place), then buckets about GROWTH apart in rank (at a million fans, ~215 of
# them: an interpolated rank is off by at most ~2.5 % of the position), and EVEN more evenly
# spread over the keys (bucket_bounds).
FRONT = 32
GROWTH = 1.05
EVEN = 128
REMEMBERED_MAX = 64
# How long a thread waits for a snapshot another is taking, before taking its own.
WAIT_SECONDS = 10.0


@dataclass(frozen=True)
class TierSnapshot:
    tier_id: int
    count: int
    checkpoints: tuple[tuple[int, int], ...]  # (0-based rank, order key), ascending


@dataclass(frozen=True)
class LineSnapshot:
    event_id: int
    taken_at: float  # time.monotonic()
    prequeue: int
    tiers: tuple[TierSnapshot, ...]  # in the layout's order when it was taken

    @property
    def waiting(self) -> int:
        return sum(tier.count for tier in self.tiers)

    def counts(self, layout: EventLayout) -> LineCounts:
        """The line's counts in ``layout``'s tier order (a tier added since counts 0);
        ``state`` MISSING: not the hot index's."""
        by_id = {tier.tier_id: tier.count for tier in self.tiers}
        return LineCounts(
            state=IndexState.MISSING,
            prequeue=self.prequeue,
            tiers=tuple(by_id.get(tier.id, 0) for tier in layout.tiers),
        )

    def position(self, layout: EventLayout, *, tier_id: int, order_key: int) -> SketchedPosition:
        """Where a waiting fan of ``tier_id`` with ``order_key`` stands, placed in memory."""
        mine = next((tier for tier in self.tiers if tier.tier_id == tier_id), None)
        return position_from_sketch(
            layout,
            tier_id=tier_id,
            order_key=order_key,
            checkpoints=mine.checkpoints if mine is not None else (),
            tier_counts=self.counts(layout).tiers,
        )


# ------------------------------------------------------------------------- taking one


def snapshot_take(layout: EventLayout) -> LineSnapshot:
    """One snapshot of the line, read now (per tier: two index probes and one count of its
    entries by bucket; and one count of the pre-queue)."""
    with transaction.atomic(), connection.cursor() as cursor:
        # A grouped pass over a million rows is where the planner reaches for JIT, which
        # costs more to compile than it saves here.
        cursor.execute("SET LOCAL jit = off")
        tiers = tuple(_tier_take(cursor, layout.event_id, tier.id) for tier in layout.tiers)
        cursor.execute(
            "SELECT count(*) FROM queueing_queueentry WHERE event_id = %s AND status = %s",
            [layout.event_id, EntryStatus.PREQUEUE.value],
        )
        prequeue = int(cursor.fetchone()[0])
    return LineSnapshot(
        event_id=layout.event_id, taken_at=time.monotonic(), prequeue=prequeue, tiers=tiers
    )


# The partial index entry_waiting_order (event, tier, order key) WHERE status = 'waiting'
# AND passed_over_at IS NULL: the line's order (records/entry_reads.IN_ORDER).
_WAITING = "event_id = %s AND tier_id = %s AND status = %s AND passed_over_at IS NULL"

_W = EntryStatus.WAITING.value


def _tier_take(cursor: CursorWrapper, event_id: int, tier_id: int) -> TierSnapshot:
    cursor.execute(
        f"SELECT order_key FROM queueing_queueentry WHERE {_WAITING} ORDER BY order_key LIMIT %s",
        [event_id, tier_id, _W, FRONT + 1],
    )
    front = [int(row[0]) for row in cursor.fetchall()]
    if len(front) <= FRONT:  # the whole tier
        return TierSnapshot(tier_id=tier_id, count=len(front), checkpoints=tuple(enumerate(front)))
    cursor.execute(
        f"SELECT max(order_key) FROM queueing_queueentry WHERE {_WAITING}",
        [event_id, tier_id, _W],
    )
    # Read committed: the tier may have emptied since the probe above (NULL then).
    last = int(cursor.fetchone()[0] or front[-1])
    bounds = bucket_bounds(first=front[0], front_end=front[FRONT], last=last)
    # A range scan of the index per bucket (each an index-only count): grouping the whole
    # tier by bucket instead sorts or hashes every row, four times the cost at a million.
    cursor.execute(
        "SELECT b.n, b.low, b.high FROM unnest(%s::bigint[], %s::bigint[]) AS r(lo, hi) "
        "CROSS JOIN LATERAL (SELECT count(*) AS n, min(order_key) AS low, max(order_key) AS "
        f"high FROM queueing_queueentry WHERE {_WAITING} AND order_key >= r.lo "
        "AND order_key < r.hi) AS b ORDER BY r.lo",
        [bounds, [*bounds[1:], last + 1], event_id, tier_id, _W],
    )
    return tier_from_buckets(
        tier_id,
        front[:FRONT],
        [(int(n), int(low), int(high)) for n, low, high in cursor.fetchall() if n],
    )


def bucket_bounds(*, first: int, front_end: int, last: int) -> list[int]:
    """Lower bounds of the buckets behind the front, in order keys, ascending: the first at
    the key of rank ``FRONT`` (``front_end``); then bounds growing by ``GROWTH`` in distance
    from the first fan's key, which are about ``GROWTH`` apart in rank where the on-sale holds
    keys as densely as at its front (keys come from one sequence for the whole room); and,
    whatever the density, ``EVEN`` evenly spaced bounds, so that no bucket spans more than
    that share of the keys."""
    bounds = {front_end}
    reach = float(max(1, front_end - first))
    while (bound := first + int(reach)) <= last:
        bounds.add(bound)
        reach *= GROWTH
    step = (last - front_end) / EVEN
    bounds.update(front_end + int(step * i) for i in range(1, EVEN))
    return sorted(b for b in bounds if front_end <= b <= last)


def tier_from_buckets(
    tier_id: int, front: Sequence[int], buckets: Sequence[tuple[int, int, int]]
) -> TierSnapshot:
    """A tier's snapshot from its front's keys and its buckets behind, in order, each as
    ``(count, lowest key, highest key)``: a checkpoint at each bucket's first and last fan."""
    checkpoints = list(enumerate(front))
    rank = len(front)
    for count, low, high in buckets:
        checkpoints.append((rank, low))
        if count > 1:
            checkpoints.append((rank + count - 1, high))
        rank += count
    return TierSnapshot(tier_id=tier_id, count=rank, checkpoints=tuple(checkpoints))


# -------------------------------------------------------------- the process's snapshots


class Snapshots:
    """The snapshots of one process, shared by its threads and its event loop. Locks are
    held only around the dictionaries, never while a snapshot is read from PostgreSQL."""

    def __init__(self) -> None:
        self._kept: ProcessCache[int, LineSnapshot] = ProcessCache(
            "line snapshots",
            seconds=lambda: settings.WR_DEGRADED_SNAPSHOT_SECONDS,
            max_entries=REMEMBERED_MAX,
        )
        self._lock = threading.Lock()
        self._reading: dict[int, threading.Event] = {}  # set when that read ends

    def kept(self, event_id: int) -> tuple[LineSnapshot | None, bool]:
        """The kept snapshot (None: none), and whether it is fresh enough to use as it is."""
        found = self._kept.kept(event_id)
        if found is None:
            return None, False
        snapshot, age = found
        return snapshot, age < settings.WR_DEGRADED_SNAPSHOT_SECONDS

    def claim(self, event_id: int) -> threading.Event | None:
        """None when this thread may read the next snapshot (and must ``read`` it), else
        the event that another thread's read sets when it ends."""
        with self._lock:
            under_way = self._reading.get(event_id)
            if under_way is None:
                self._reading[event_id] = threading.Event()
            return under_way

    def read(self, layout: EventLayout) -> LineSnapshot:
        """Read the next snapshot, under the claim this thread holds."""
        event_id = layout.event_id
        try:
            snapshot = snapshot_take(layout)
        except BaseException:
            self._release(event_id)
            raise
        self._kept.put(event_id, snapshot, kept_at=snapshot.taken_at)
        self._release(event_id)
        return snapshot

    def _release(self, event_id: int) -> None:
        with self._lock:
            done = self._reading.pop(event_id, None)
        if done is not None:
            done.set()


_snapshots = Snapshots()


def line_snapshot(layout: EventLayout) -> LineSnapshot:
    """The on-sale's snapshot: the kept one while fresh, or while another thread reads the
    next; read here otherwise (at most one read at a time per on-sale and process). Raises
    DatabaseError (OperationalError when another read hangs) when it must be read and
    cannot be."""
    event_id = layout.event_id
    kept, fresh = _snapshots.kept(event_id)
    if fresh and kept is not None:
        return kept
    under_way = _snapshots.claim(event_id)
    if under_way is None:
        return _snapshots.read(layout)
    if kept is not None:
        return kept  # at most one read older than the one under way
    under_way.wait(WAIT_SECONDS)
    kept, _ = _snapshots.kept(event_id)
    if kept is not None:
        return kept
    # The other read failed (or hangs): this thread reads once its claim is free.
    if _snapshots.claim(event_id) is None:
        return _snapshots.read(layout)
    # Unavailable, as PostgreSQL unreachable is (a 503 to the fan), not a bug (a 500).
    raise OperationalError(f"no snapshot of the line of event {event_id} could be read")


@closes_old_connections
def _read_in_thread(layout: EventLayout) -> LineSnapshot:
    return line_snapshot(layout)


# Per event loop: the snapshot reads it started, so that its polls start one, not many.
_under_way: PerEventLoop[dict[int, asyncio.Future[LineSnapshot]]] = PerEventLoop(dict)


async def line_snapshot_async(layout: EventLayout) -> LineSnapshot:
    """``line_snapshot`` from the event loop, which it never blocks: a stale snapshot is
    answered at once while the next is read in a thread; only a first one is awaited."""
    event_id = layout.event_id
    kept, fresh = _snapshots.kept(event_id)
    if fresh and kept is not None:
        return kept
    under_way = _under_way.get()
    future = under_way.get(event_id)
    if future is None:
        future = asyncio.ensure_future(asyncio.to_thread(_read_in_thread, layout))
        under_way[event_id] = future
        future.add_done_callback(lambda done: _read_ended(under_way, event_id, done))
    if kept is not None:
        return kept
    # Shielded: a poll that goes away must not cancel the read others wait for.
    return await asyncio.shield(future)


def _read_ended(
    under_way: dict[int, asyncio.Future[LineSnapshot]],
    event_id: int,
    done: asyncio.Future[LineSnapshot],
) -> None:
    under_way.pop(event_id, None)
    if not done.cancelled():
        done.exception()  # seen: a background read's failure is the next poll's to meet
