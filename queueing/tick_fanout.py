"""Ticks to every waiting page of this process: one subscription per event, one relay per page.

Through Channels, a tick reached each page as a message of its own: queued per consumer, then
picked up by the consumer's dispatch loop (a new task and an ``asyncio.wait`` per message).
At 10,000 pages a second that bookkeeping cost about as much as writing to the sockets
(profiled in docs/benchmarks.md). Here each process subscribes once per event (a channel of
its own in the event's group) and hands the tick's text to each page's relay, which sends the
newest tick when its socket can take it: a slow page skips ticks rather than holding others up.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import get_channel_layer

from queueing.live import event_group

logger = logging.getLogger(__name__)

Send = Callable[[str], Awaitable[None]]

RESUBSCRIBE_SECONDS = 1.0


class TickRelay:
    """One page's latest tick and the task that sends it."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._latest: str | None = None
        self._ready = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def offer(self, text: str) -> None:
        self._latest = text
        self._ready.set()

    def close(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            text, self._latest = self._latest, None
            if text is not None:
                try:
                    await self._send(text)
                except Exception:  # noqa: BLE001  a closed socket: its consumer is leaving
                    return


class EventFanout:
    """The pages of one event in this process, fed by one subscription to its group."""

    def __init__(self, event_id: int) -> None:
        self.event_id = event_id
        self.relays: set[TickRelay] = set()
        self.subscribed = asyncio.Event()  # set once subscribed (or failed to)
        self._task = asyncio.get_running_loop().create_task(self._receive())

    async def _receive(self) -> None:
        layer = get_channel_layer()
        assert layer is not None
        while True:
            channel = None
            try:
                try:
                    channel = await layer.new_channel()
                    await layer.group_add(event_group(self.event_id), channel)
                finally:
                    self.subscribed.set()
                while True:
                    message: dict[str, Any] = await layer.receive(channel)
                    if message.get("type") == "line.tick":
                        for relay in list(self.relays):
                            relay.offer(message["text"])
            except asyncio.CancelledError:
                if channel is not None:
                    await layer.group_discard(event_group(self.event_id), channel)
                raise
            except Exception:
                # Redis went away: pages poll meanwhile (they notice missing ticks), and
                # this subscribes again once it is back.
                logger.warning(
                    "tick subscription of event %s lost; retrying", self.event_id, exc_info=True
                )
                await asyncio.sleep(RESUBSCRIBE_SECONDS)


_fanouts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, EventFanout]] = (
    weakref.WeakKeyDictionary()
)


async def tick_relay_open(event_id: int, send: Send) -> TickRelay:
    """Start relaying the event's ticks to a page (from the next tick broadcast after this
    returns); ``tick_relay_close`` when it leaves."""
    by_event = _fanouts.setdefault(asyncio.get_running_loop(), {})
    fanout = by_event.get(event_id)
    if fanout is None or fanout._task.done():
        fanout = by_event[event_id] = EventFanout(event_id)
    relay = TickRelay(send)
    fanout.relays.add(relay)
    await fanout.subscribed.wait()
    return relay


def tick_relay_close(event_id: int, relay: TickRelay) -> None:
    relay.close()
    fanout = _fanouts.get(asyncio.get_running_loop(), {}).get(event_id)
    if fanout is not None:
        fanout.relays.discard(relay)
