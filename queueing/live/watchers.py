"""Fans watching over a WebSocket keep their tickets alive.

Rather than a Redis write per socket per tick, each process keeps the set of tickets its open
sockets watch and pushes their heartbeat deadlines in one command per event every few seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Mapping

from queueing.line.expiry import heartbeats_refresh

logger = logging.getLogger(__name__)

REFRESH_SECONDS = 5.0  # well inside the shortest heartbeat allowed (10 s)


class Watchers:
    def __init__(self) -> None:
        self._entries: dict[int, Counter[int]] = {}
        self._heartbeat: dict[int, int] = {}
        # The lane of each watched entry not in lane 0 (its heartbeat's key is its lane's).
        self._lanes: dict[int, int] = {}
        self._task: asyncio.Task[None] | None = None

    def add(self, event_id: int, entry_id: int, heartbeat_seconds: int, lane: int = 0) -> None:
        self._entries.setdefault(event_id, Counter())[entry_id] += 1
        if lane:
            self._lanes[entry_id] = lane
        self._heartbeat[event_id] = heartbeat_seconds
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

    def snapshot(self) -> list[tuple[int, list[int], int]]:
        """(event, entries, heartbeat) — taken on the event loop, which alone mutates."""
        return [
            (event_id, list(entries), self._heartbeat[event_id])
            for event_id, entries in self._entries.items()
        ]

    @staticmethod
    def refresh(
        snapshot: list[tuple[int, list[int], int]], lanes: Mapping[int, int] | None = None
    ) -> None:
        now = time.time()
        for event_id, members, heartbeat_seconds in snapshot:
            if not heartbeats_refresh(
                event_id, members, deadline=now + heartbeat_seconds, lanes=lanes
            ):
                logger.warning("could not refresh heartbeats of event %s", event_id)

    async def _run(self) -> None:
        while self._entries:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await asyncio.to_thread(self.refresh, self.snapshot(), dict(self._lanes))
            except Exception:
                # A missed round must be seen: sockets' tickets would expire.
                logger.exception("heartbeat refresh failed")


watchers = Watchers()
