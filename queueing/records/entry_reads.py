"""Reading queue entries in PostgreSQL: the fans already in line (per identity, per client
address), counts and positions counted row by row (for what the hot index cannot answer),
what only a page needs of an entry, what re-entry reads (the front of a tier, the
admissions it took out of ``admitted_at``), and the place a random line's rejoin keeps. Reads
only: the writes are in entries.py. Over 350 lines on purpose: every read of entries in one
place, so that each query's index is found next to its siblings.

The rows a status poll needs while the hot index cannot answer are read from the event loop
in batches (``entry_row``): while Redis is away every waiting fan's poll must read its entry
from PostgreSQL, and one query per poll would make the event loop wait on a thread per poll.
Instead the entries asked for while one read runs are read together by the next, one query
by primary key however many they are (up to ``READ_BATCH``). Nothing is remembered: a status
must be as fresh as the read (an admitted fan must hear so).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Count, Min, Q

from events.models import Tier
from queueing.in_process import PerEventLoop, closes_old_connections
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.rules.layout import TierLayout
from queueing.rules.states import LIVE, TERMINAL, EntryStatus

# The key, in a ``reentered`` record's data, of the time the fan's earlier session was admitted:
# the entry's own ``admitted_at`` is cleared while it waits again ("queued means not admitted").
FIRST_ADMITTED_AT = "admitted_at"


# ------------------------------------------------------------------- the fans in line


def live_entries(event_id: int, identities: set[str]) -> dict[str, QueueEntry]:
    """Each identity's live ticket for the event (one at most: a partial unique index)."""
    if not identities:
        return {}
    return {
        entry.identity: entry
        for entry in QueueEntry.objects.filter(
            event_id=event_id, identity__in=identities, status__in=LIVE
        )
    }


@dataclass(frozen=True)
class UnusedPlace:
    """A place in a random line that an identity's ticket left without being let in."""

    order_key: int
    # The ticket whose keyed hash the place is (rules/shuffle.py, ``place_key``): the first of
    # the identity's tickets to hold it.
    placed_by: str


def unused_places(event_id: int, identities: Collection[str]) -> dict[str, UnusedPlace]:
    """Each identity's place that its latest ended ticket of the on-sale left unused (it was
    never let in): a random line's rejoin keeps it (line/joining.py). A ticket that had its
    turn leaves no place: its identity's next ticket is placed by its own hash."""
    if not identities:
        return {}
    latest = (
        QueueEntry.objects.filter(event_id=event_id, identity__in=identities, status__in=TERMINAL)
        .order_by("identity", "-id")
        .distinct("identity")
        .values_list("identity", "public_id", "order_key", "admitted_at")
    )
    unused = {
        identity: (str(public_id), order_key)
        for identity, public_id, order_key, admitted_at in latest
        if admitted_at is None
    }
    if not unused:
        return {}
    # A ticket that kept an earlier one's place names it in its joined record.
    kept_from = dict(
        AuditRecord.objects.filter(
            event_id=event_id,
            action=AuditAction.JOINED,
            ticket_id__in=[ticket for ticket, _ in unused.values()],
        ).values_list("ticket_id", "data__placed_by")
    )
    return {
        identity: UnusedPlace(
            order_key=order_key, placed_by=str(kept_from.get(uuid.UUID(ticket)) or ticket)
        )
        for identity, (ticket, order_key) in unused.items()
    }


def live_per_address(event_id: int, addresses: set[str]) -> dict[str, int]:
    """How many live tickets of the event each client address (digest) holds."""
    if not addresses:
        return {}
    return dict(
        QueueEntry.objects.filter(event_id=event_id, address__in=addresses, status__in=LIVE)
        .values("address")
        .annotate(n=Count("id"))
        .values_list("address", "n")
    )


# Waiting in the line's order: not those passed over while away (queueing/line/away.py),
# who are out of it until they come back (index entry_waiting_order).
IN_ORDER = Q(status=EntryStatus.WAITING, passed_over_at__isnull=True)


def anyone_joined(event_id: int) -> bool:
    """Whether anyone ever joined the on-sale's line: its lanes are fixed from then on
    (queueing/rules/lanes.py)."""
    return QueueEntry.objects.filter(event_id=event_id).exists()


def position_counted(entry: QueueEntry, tiers: Sequence[TierLayout]) -> int:
    """The fan's position counted row by row (``tiers`` in service order): O(position), for
    short lines only."""
    tiers_ahead = []
    for tier in tiers:
        if tier.id == entry.tier_id:
            break
        tiers_ahead.append(tier.id)
    ahead = QueueEntry.objects.filter(
        Q(tier_id__in=tiers_ahead) | Q(tier_id=entry.tier_id, order_key__lt=entry.order_key),
        IN_ORDER,
        event_id=entry.event_id,
    ).count()
    return ahead + 1


def waiting_counts(event_ids: Collection[int]) -> dict[int, tuple[int, dict[int, int]]]:
    """Per on-sale, the pre-queue's size and how many wait in each tier, in one grouped
    count (on-sales with nobody in line are left out)."""
    rows = (
        QueueEntry.objects.filter(
            event_id__in=event_ids, status__in=[EntryStatus.WAITING, EntryStatus.PREQUEUE]
        )
        .values_list("event_id", "status", "tier_id")
        .annotate(n=Count("id"))
        .values_list("event_id", "status", "tier_id", "n")
    )
    counts: dict[int, tuple[int, dict[int, int]]] = {}
    for event_id, status, tier_id, n in rows:
        prequeue, by_tier = counts.get(event_id, (0, {}))
        if status == EntryStatus.PREQUEUE:
            prequeue += n
        else:
            by_tier[tier_id] = n
        counts[event_id] = (prequeue, by_tier)
    return counts


def active_counts(event_ids: Collection[int]) -> dict[int, int]:
    """Fans in the shop per event, in one grouped count (index on event, status)."""
    rows = (
        QueueEntry.objects.filter(event_id__in=event_ids, status=EntryStatus.ADMITTED)
        .values_list("event_id")
        .annotate(n=Count("id"))
        .values_list("event_id", "n")
    )
    return {event_id: 0 for event_id in event_ids} | dict(rows)


def default_tier_ids(event_id: int) -> set[int]:
    """The tier fans without an access code join (a set: none, or one)."""
    return set(Tier.objects.filter(event_id=event_id, is_default=True).values_list("id", flat=True))


# ------------------------------------------------------------ what a page needs of one


def entry_return_url(*, entry_id: int, event_id: int) -> str:
    """The return URL kept with an entry ("" = none, or no such entry)."""
    found = (
        QueueEntry.objects.filter(pk=entry_id, event_id=event_id)
        .values_list("return_url", flat=True)
        .first()
    )
    return found or ""


@dataclass(frozen=True)
class PageFacts:
    """What only the waiting page needs of an entry (never the hot status path)."""

    holder_key: str  # which browser shows the place ("" until it was moved)
    notify_email: str  # the address left for "it's your turn" ("" for none)
    status: EntryStatus
    event_id: int


def entry_page_facts(entry_id: int) -> PageFacts | None:
    row = (
        QueueEntry.objects.filter(pk=entry_id)
        .values_list("holder_key", "notify_email", "status", "event_id")
        .first()
    )
    if row is None:
        return None
    return PageFacts(
        holder_key=row[0], notify_email=row[1], status=EntryStatus(row[2]), event_id=row[3]
    )


def tier_smallest_waiting_key(*, event_id: int, tier_id: int) -> int | None:
    """The order key at the front of a tier's line (index entry_waiting_order)."""
    return QueueEntry.objects.filter(IN_ORDER, event_id=event_id, tier_id=tier_id).aggregate(
        smallest=Min("order_key")
    )["smallest"]


def earlier_admissions_since(*, event_id: int, since: datetime) -> int:
    """Admissions after ``since`` of sessions that a re-entry has since cleared from their
    entry's ``admitted_at``: the rate window must still count them. Read from the
    ``reentered`` records (index audit_event_action_at), which keep that time; a re-entry
    comes after its admission, so only records after ``since`` can hold one."""
    count = 0
    for data in AuditRecord.objects.filter(
        event_id=event_id, action=AuditAction.REENTERED, at__gt=since
    ).values_list("data", flat=True):
        first = data.get(FIRST_ADMITTED_AT) if isinstance(data, dict) else None
        if first is not None and datetime.fromisoformat(first) > since:
            count += 1
    return count


# ------------------------------------------------- rows read from the event loop, batched

READ_BATCH = 1_000
# How long the first poll of a batch waits for others to join it: at thousands of polls a
# second, reads of one or two entries each would cost PostgreSQL far more than the entries.
GATHER_SECONDS = 0.002


@dataclass(frozen=True)
class EntryRow:
    id: int
    event_id: int
    tier_id: int
    status: EntryStatus
    order_key: int
    holder_key: str  # "" until the place is moved to another browser
    passed_over: bool = False  # passed over while away: the answer brings them back


def entry_rows_read(ids: Collection[int]) -> dict[int, EntryRow]:
    """The entries that exist among ``ids``, in one query (one text whatever their number:
    ``= ANY`` of an array, not a list of as many parameters)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, event_id, tier_id, status, order_key, holder_key, "
            "passed_over_at IS NOT NULL FROM queueing_queueentry WHERE id = ANY(%s)",
            [list(ids)],
        )
        rows = cursor.fetchall()
    return {
        row[0]: EntryRow(
            id=row[0],
            event_id=row[1],
            tier_id=row[2],
            status=EntryStatus(row[3]),
            order_key=row[4],
            holder_key=row[5],
            passed_over=row[6],
        )
        for row in rows
    }


@closes_old_connections
def _read_in_thread(ids: list[int]) -> dict[int, EntryRow]:
    return entry_rows_read(ids)


class EntryRowReads:
    """The reads of one event loop (a future belongs to the loop that made it)."""

    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future[EntryRow | None]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def row(self, entry_id: int) -> EntryRow | None:
        """The entry's row (None: no such entry); raises DatabaseError when it could not
        be read."""
        future = self._waiting.get(entry_id)
        if future is None:
            future = self._waiting[entry_id] = asyncio.get_running_loop().create_future()
            if self._reader is None:
                self._reader = asyncio.get_running_loop().create_task(self._read_all())
        # Shielded: a poll that goes away must not cancel the answer others wait for.
        return await asyncio.shield(future)

    async def _read_all(self) -> None:
        try:
            await asyncio.sleep(GATHER_SECONDS)
            while self._waiting:
                ids = list(self._waiting)[:READ_BATCH]
                reading = {entry_id: self._waiting.pop(entry_id) for entry_id in ids}
                try:
                    found = await asyncio.to_thread(_read_in_thread, ids)
                except Exception as exc:  # noqa: BLE001  (every waiter gets it)
                    for future in reading.values():
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for entry_id, future in reading.items():
                    if not future.done():
                        future.set_result(found.get(entry_id))
        finally:
            self._reader = None


_per_loop = PerEventLoop(EntryRowReads)


async def entry_row(entry_id: int) -> EntryRow | None:
    """``EntryRowReads.row`` of the running loop's reads."""
    return await _per_loop.get().row(entry_id)


@dataclass(frozen=True)
class EntryTotals:
    """What ``/metrics`` says of an on-sale besides its line."""

    active: int  # in the shop now
    admitted: int  # admissions so far (a re-entered fan's earlier one counts)
    expired: int


def entry_totals(event_ids: Collection[int]) -> dict[int, EntryTotals]:
    """Per on-sale, three grouped counts, each read from an index of the rows it counts (never
    the rows of the fans in line): the shop and the expired by (event, status), admissions by
    the admitted-at index, and the admissions a re-entry cleared from the trail's
    ``reentered`` records (one per re-entry: a ticket goes back in line once)."""
    if not event_ids:
        return {}
    by_status: dict[tuple[int, str], int] = {
        (event_id, status): n
        for event_id, status, n in QueueEntry.objects.filter(
            event_id__in=event_ids, status__in=(EntryStatus.ADMITTED, EntryStatus.EXPIRED)
        )
        .values_list("event_id", "status")
        .annotate(n=Count("id"))
        .values_list("event_id", "status", "n")
    }
    admitted = dict(
        QueueEntry.objects.filter(event_id__in=event_ids, admitted_at__isnull=False)
        .values_list("event_id")
        .annotate(n=Count("id"))
        .values_list("event_id", "n")
    )
    reentered = dict(
        AuditRecord.objects.filter(event_id__in=event_ids, action=AuditAction.REENTERED)
        .values_list("event_id")
        .annotate(n=Count("id"))
        .values_list("event_id", "n")
    )
    return {
        event_id: EntryTotals(
            active=by_status.get((event_id, EntryStatus.ADMITTED), 0),
            admitted=admitted.get(event_id, 0) + reentered.get(event_id, 0),
            expired=by_status.get((event_id, EntryStatus.EXPIRED), 0),
        )
        for event_id in event_ids
    }
