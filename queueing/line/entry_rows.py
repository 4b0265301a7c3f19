"""Entries' rows read from the event loop, batched: what a status poll needs of its entry when
the hot index cannot answer (its status, tier and order key).

While Redis is away every waiting fan's poll must read its entry from PostgreSQL. One
query per poll would make the event loop wait on a thread per poll; instead the entries
asked for while one read runs are read together by the next, one query by primary key
however many they are (up to ``READ_BATCH``). Nothing is remembered: a status must be as
fresh as the read (an admitted fan must hear so).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Collection
from dataclasses import dataclass

from django.db import connection

from queueing.in_process import closes_old_connections
from queueing.rules.states import EntryStatus

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


def entry_rows_read(ids: Collection[int]) -> dict[int, EntryRow]:
    """The entries that exist among ``ids``, in one query (one text whatever their number:
    ``= ANY`` of an array, not a list of as many parameters)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, event_id, tier_id, status, order_key FROM queueing_queueentry "
            "WHERE id = ANY(%s)",
            [list(ids)],
        )
        rows = cursor.fetchall()
    return {
        row[0]: EntryRow(
            id=row[0], event_id=row[1], tier_id=row[2], status=EntryStatus(row[3]), order_key=row[4]
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


_PER_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, EntryRowReads] = (
    weakref.WeakKeyDictionary()
)


async def entry_row(entry_id: int) -> EntryRow | None:
    """``EntryRowReads.row`` of the running loop's reads."""
    loop = asyncio.get_running_loop()
    reads = _PER_LOOP.get(loop)
    if reads is None:
        reads = _PER_LOOP[loop] = EntryRowReads()
    return await reads.row(entry_id)
