"""Whether an admitted fan's session is still on, for the gate: the entry's status as
PostgreSQL had it at most ``WR_GATE_STATE_SECONDS`` ago.

A pass's signature stays valid after the session ended (completed, abandoned, revoked,
expired), so the gate must ask the database; asking it on every request to a protected shop
would put PostgreSQL on the hottest path of all. Each web process remembers the status it
read per pass for ``WR_GATE_STATE_SECONDS`` (a bounded number of them), and the reads it
must make are batched: the tickets asked for while one read runs are read together by the
next, one query however many they are, and a ticket whose read is under way waits for it.
A status past half its time is still used, and read again in the background: a fan who
keeps browsing never waits for PostgreSQL (a request that must wait for a read is what made
the gate's p99 in the benchmark).

The bound: an answer is never older than the moment its read *started*, plus
``WR_GATE_STATE_SECONDS``. A session ended (its transaction committed) at time T is
therefore refused by every process from T + ``WR_GATE_STATE_SECONDS`` + the length of one
read at the latest.
"""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Collection

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from queueing.models import QueueEntry

SessionKey = tuple[str, uuid.UUID]  # the on-sale's slug, the ticket id (a pass's aud, sub)

# Statuses remembered per process (about 200 bytes each).
REMEMBERED_MAX = 50_000
# Tickets read by one query at most.
READ_BATCH = 1_000


def session_statuses_read(keys: Collection[SessionKey]) -> dict[SessionKey, str | None]:
    """The entries' statuses now (None: no such entry for that on-sale), in one query."""
    found: dict[SessionKey, str | None] = dict.fromkeys(keys)
    rows = QueueEntry.objects.filter(public_id__in={ticket for _, ticket in keys}).values_list(
        "public_id", "event__slug", "status"
    )
    for ticket_id, slug, status in rows:
        if (slug, ticket_id) in found:
            found[(slug, ticket_id)] = status
    return found


def _read_in_thread(keys: list[SessionKey]) -> dict[SessionKey, str | None]:
    # As around a Django request: a connection broken by a restart is not kept.
    close_old_connections()
    try:
        return session_statuses_read(keys)
    finally:
        close_old_connections()


class SessionStates:
    """The remembered statuses and the reads under way, for one event loop (a future
    belongs to the loop that made it)."""

    def __init__(self) -> None:
        self._known: OrderedDict[SessionKey, tuple[float, str | None]] = OrderedDict()
        # The next read's tickets, each with the future its requests wait on (None: read
        # in the background, nobody waits).
        self._waiting: dict[SessionKey, asyncio.Future[str | None] | None] = {}
        self._reading: dict[SessionKey, asyncio.Future[str | None] | None] = {}  # under way
        self._reader: asyncio.Task[None] | None = None

    async def status(self, key: SessionKey) -> str | None:
        """The status of the entry ``key`` names; raises DatabaseError when it had to be read
        and could not be."""
        known = self._known.get(key)
        if known is not None:
            age = time.monotonic() - known[0]
            if age < settings.WR_GATE_STATE_SECONDS:
                if age >= settings.WR_GATE_STATE_SECONDS / 2 and not self._asked(key):
                    self._ask(key, None)
                return known[1]
        future = self._reading.get(key) or self._waiting.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._ask(key, future)
        # Shielded: a request that goes away must not cancel the answer others wait for.
        return await asyncio.shield(future)

    def _asked(self, key: SessionKey) -> bool:
        return key in self._waiting or key in self._reading

    def _ask(self, key: SessionKey, future: asyncio.Future[str | None] | None) -> None:
        self._waiting[key] = future
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read_all())

    async def _read_all(self) -> None:
        try:
            while self._waiting:
                keys = list(self._waiting)[:READ_BATCH]
                self._reading = {key: self._waiting.pop(key) for key in keys}
                started = time.monotonic()
                try:
                    found = await sync_to_async(_read_in_thread)(keys)
                except Exception as exc:  # noqa: BLE001  (every waiter gets it)
                    for future in self._reading.values():
                        if future is not None and not future.done():
                            future.set_exception(exc)
                    continue
                finally:
                    reading, self._reading = self._reading, {}
                for key, status in found.items():
                    self._remember(key, started, status)
                    future = reading[key]
                    if future is not None and not future.done():
                        future.set_result(status)
        finally:
            self._reader = None

    def _remember(self, key: SessionKey, read_at: float, status: str | None) -> None:
        self._known[key] = (read_at, status)
        self._known.move_to_end(key)
        while len(self._known) > REMEMBERED_MAX:
            self._known.popitem(last=False)


_PER_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SessionStates] = (
    weakref.WeakKeyDictionary()
)


async def session_status(key: SessionKey) -> str | None:
    """``SessionStates.status`` of the running loop's states."""
    loop = asyncio.get_running_loop()
    states = _PER_LOOP.get(loop)
    if states is None:
        states = _PER_LOOP[loop] = SessionStates()
    return await states.status(key)
