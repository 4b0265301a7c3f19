"""Fans watching over a WebSocket keep their tickets alive.

Rather than a Redis write per socket per tick, each process keeps the set of tickets its open
sockets watch and pushes their heartbeat deadlines in one command per on-sale, at the pace
its heartbeat needs (``rules/layout.keepalive_seconds``: a third of it, at most 30 s): a
refresh may fail twice before anyone would be away. A failed refresh is tried again after
``RETRY_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Mapping

from queueing.line.expiry import heartbeats_refresh
from queueing.rules.layout import keepalive_seconds

logger = logging.getLogger(__name__)

RETRY_SECONDS = 1.0
WAKE_SECONDS = 1.0


class Watchers:
    def __init__(self) -> None:
        self._entries: dict[int, Counter[int]] = {}
        self._heartbeat: dict[int, int] = {}
        # The lane of each watched entry not in lane 0 (its heartbeat's key is its lane's).
        self._lanes: dict[int, int] = {}
        # When each on-sale's tickets are refreshed next (time.monotonic()). A socket's first
        # snapshot refreshed its ticket already (queueing/line/answers.py), so a new
        # on-sale's first refresh comes one keep-alive later.
        self._due: dict[int, float] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, event_id: int, entry_id: int, heartbeat_seconds: int, lane: int = 0) -> None:
        self._entries.setdefault(event_id, Counter())[entry_id] += 1
        if lane:
            self._lanes[entry_id] = lane
        self._heartbeat[event_id] = heartbeat_seconds
        if event_id not in self._due:
            self._due[event_id] = time.monotonic() + keepalive_seconds(heartbeat_seconds)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, event_id: int, entry_id: int) -> None:
        watched = self._entries.get(event_id)
        if watched is None:
            return
        watched[entry_id] -= 1
        if watched[entry_id] <= 0:
            del watched[entry_id]
            self._lanes.pop(entry_id, None)
        if not watched:
            del self._entries[event_id]
            self._due.pop(event_id, None)

    def snapshot(self) -> list[tuple[int, list[int], int]]:
        """(event, entries, heartbeat) — taken on the event loop, which alone mutates."""
        return [
            (event_id, list(entries), self._heartbeat[event_id])
            for event_id, entries in self._entries.items()
        ]

    @staticmethod
    def refresh(
        snapshot: list[tuple[int, list[int], int]], lanes: Mapping[int, int] | None = None
    ) -> list[int]:
        """Push the deadlines of these on-sales' tickets; the on-sales it could not."""
        now = time.time()
        failed = []
        for event_id, members, heartbeat_seconds in snapshot:
            if not heartbeats_refresh(
                event_id, members, deadline=now + heartbeat_seconds, lanes=lanes
            ):
                logger.warning("could not refresh heartbeats of event %s", event_id)
                failed.append(event_id)
        return failed

    async def _run(self) -> None:
        while self._entries:
            now = time.monotonic()
            due = [event_id for event_id, at in self._due.items() if at <= now]
            if not due:
                # At most a second: an on-sale whose first socket just opened may be due first.
                await asyncio.sleep(
                    min(WAKE_SECONDS, min(self._due.values(), default=now + WAKE_SECONDS) - now)
                )
                continue
            for event_id in due:
                self._due[event_id] = now + keepalive_seconds(self._heartbeat[event_id])
            chosen = [row for row in self.snapshot() if row[0] in due]
            try:
                failed = await asyncio.to_thread(self.refresh, chosen, dict(self._lanes))
            except Exception:
                # A missed round must be seen: sockets' tickets would expire.
                logger.exception("heartbeat refresh failed")
                failed = due
            for event_id in failed:
                if event_id in self._due:
                    self._due[event_id] = time.monotonic() + RETRY_SECONDS


watchers = Watchers()
