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
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import get_channel_layer

from queueing.hot.channels import event_group
from queueing.in_process import PerEventLoop

logger = logging.getLogger(__name__)

Send = Callable[[str], Awaitable[None]]

RESUBSCRIBE_SECONDS = 1.0
SUBSCRIBE_TIMEOUT_SECONDS = 5.0


class TickRelay:
    """One page's latest tick and the task that sends it."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._latest: str | None = None  # to send
        self.newest: str | None = None  # the newest tick offered, sent or not
        self._ready = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())
        # Set while the page shows the pre-queue: called at each tick that says the line has
        # started, until the page has its shuffled place (queueing/web/consumers.py).
        self.on_started: Callable[[], None] | None = None

    def offer(self, text: str) -> None:
        self._latest = self.newest = text
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
        self.subscribed = asyncio.Event()  # set once subscribed, or once that failed
        self._task = asyncio.get_running_loop().create_task(self._receive())

    @property
    def ended(self) -> bool:
        """Could not subscribe (or was torn down): a new page needs a new fan-out."""
        return self._task.done()

    def stop(self) -> None:
        self._task.cancel()

    async def _receive(self) -> None:
        layer = get_channel_layer()
        assert layer is not None
        group = event_group(self.event_id)
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
        except Exception:
            # The pages waiting for this are refused (their sockets close and they poll);
            # the next page to connect tries again.
            logger.warning(
                "could not subscribe to the ticks of event %s", self.event_id, exc_info=True
            )
            return
        finally:
            self.subscribed.set()
        try:
            while True:
                try:
                    message: dict[str, Any] = await layer.receive(channel)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # The layer reconnects to Redis by itself; keep the same channel.
                    logger.warning("ticks of event %s interrupted", self.event_id, exc_info=True)
                    await asyncio.sleep(RESUBSCRIBE_SECONDS)
                    continue
                text = message.get("text")
                if message.get("type") == "line.tick" and isinstance(text, str):
                    started = message.get("started") is True
                    for relay in list(self.relays):
                        relay.offer(text)
                        if started and relay.on_started is not None:
                            try:
                                relay.on_started()
                            except Exception:
                                # One page's trouble must not stop the ticks of the others.
                                logger.warning("a page's start hook failed", exc_info=True)
        finally:
            try:
                await layer.group_discard(group, channel)
            except Exception:  # noqa: BLE001  leaving anyway; Redis drops it with the socket
                logger.info("could not unsubscribe from the ticks of event %s", self.event_id)


_fanouts: PerEventLoop[dict[int, EventFanout]] = PerEventLoop(dict)


async def tick_relay_open(event_id: int, send: Send) -> TickRelay:
    """Start relaying the event's ticks to a page (from the next tick broadcast after this
    returns); ``tick_relay_close`` when it leaves. Raises ConnectionError when the ticks
    cannot be subscribed to (Redis unreachable): the page then polls."""
    by_event = _fanouts.get()
    fanout = by_event.get(event_id)
    if fanout is None or fanout.ended:
        fanout = by_event[event_id] = EventFanout(event_id)
    relay = TickRelay(send)
    fanout.relays.add(relay)
    try:
        await asyncio.wait_for(fanout.subscribed.wait(), SUBSCRIBE_TIMEOUT_SECONDS)
        if fanout.ended:
            raise ConnectionError(f"could not subscribe to the ticks of event {event_id}")
    except BaseException:
        tick_relay_close(event_id, relay)
        raise
    return relay


def tick_relay_close(event_id: int, relay: TickRelay) -> None:
    """Stop a page's relay; the event's subscription ends with its last page."""
    relay.close()
    by_event = _fanouts.get()
    fanout = by_event.get(event_id)
    if fanout is None:
        return
    fanout.relays.discard(relay)
    if not fanout.relays:
        fanout.stop()
        del by_event[event_id]
