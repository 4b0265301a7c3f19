"""Ticks to every waiting page of this process: one subscription per event, one relay per page.

Through Channels, a tick reached each page as a message of its own: queued per consumer, then
picked up by the consumer's dispatch loop (a new task and an ``asyncio.wait`` per message).
At 10,000 pages a second that bookkeeping cost about as much as writing to the sockets
(profiled in docs/benchmarks.md). Here each process subscribes once per event (a channel of
its own in the event's group) and hands the tick's text to each page's relay, which sends the
newest tick when its socket can take it: a slow page skips ticks rather than holding others up.

Not every page gets every tick: each is sent one as often as its distance from the front
asks (queueing/rules/tick_bands.py), placed from the tick itself, parsed once per process: the
front at every tick, far-back pages every few seconds. A tick that changes what the line is
doing goes to every page.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from heapq import heapify, heappop, heappush
from itertools import count, pairwise
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from queueing.hot.channels import event_group
from queueing.in_process import PerEventLoop
from queueing.live.tick_view import Place, TickView
from queueing.rules.tick_bands import (
    OVERLOAD_HOLD_SECONDS,
    backlogged,
    prequeue_tick_spacing,
    tick_horizon,
)

logger = logging.getLogger(__name__)

Send = Callable[[str], Awaitable[None]]

RESUBSCRIBE_SECONDS = 1.0
SUBSCRIBE_TIMEOUT_SECONDS = 5.0


# A page in the front band is placed again this often, not at every tick: its place only
# changes band when a tier served before its own grows.
FRONT_RECHECK_SECONDS = 5.0
# The expected time to the next tick: the longest of the last few gaps between ticks.
TICK_GAPS_KEPT = 5


class TickRelay:
    """One page's latest tick and the task that sends it."""

    # Thousands per process, each looked at when due: small and quick to read.
    __slots__ = (
        "_fanout",
        "_latest",
        "_ready",
        "_send",
        "_sending",
        "_task",
        "on_started",
        "place",
        "placed_at",
        "prequeue",
        "queued",
        "spacing",
    )

    def __init__(self, send: Send, fanout: EventFanout) -> None:
        self._send = send
        self._fanout = fanout
        self._latest: str | None = None  # to send
        self._sending = False
        self._ready = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())
        # Set while the page shows the pre-queue: called at each tick that says the line has
        # started, until the page has its shuffled place (queueing/web/consumers.py).
        self.on_started: Callable[[], None] | None = None
        # How often it is sent a tick (rules/tick_bands.py): its place (None: unknown, every
        # tick), whether it shows the pre-queue, how long it may go without one, when it was
        # last placed, and its entry in the fan-out's queue of pages by when they are due.
        self.place: Place | None = None
        self.prequeue = False
        self.spacing = 0.0
        self.placed_at = -math.inf
        self.queued = 0

    @property
    def newest(self) -> str | None:
        """The newest tick of the on-sale in this process, sent to this page or not."""
        return self._fanout.newest

    @property
    def behind(self) -> bool:
        """Still sending an earlier tick (its socket slow, or the process busy)."""
        return self._latest is not None or self._sending

    def placed(self, place: Place | None, *, prequeue: bool = False) -> None:
        """The page was told where it stands (a snapshot): placed again at the next tick."""
        self.place, self.prequeue = place, prequeue
        self.spacing, self.placed_at = 0.0, -math.inf
        self._fanout.due(self, -math.inf)

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
                self._sending = True
                try:
                    await self._send(text)
                except Exception:  # noqa: BLE001  a closed socket: its consumer is leaving
                    return
                finally:
                    self._sending = False


class EventFanout:
    """The pages of one event in this process, fed by one subscription to its group."""

    def __init__(self, event_id: int) -> None:
        self.event_id = event_id
        self.relays: set[TickRelay] = set()
        self.subscribed = asyncio.Event()  # set once subscribed, or once that failed
        self.newest: str | None = None
        self._doing: tuple[Any, ...] | None = None  # what the line was doing at the last tick
        self._arrivals: deque[float] = deque(maxlen=TICK_GAPS_KEPT + 1)
        self._overloaded_until = -math.inf
        # The pages by when they are due a tick (a heap; a page's earlier entries are left in
        # it and skipped): a tick looks at the pages due, not at every page.
        self._queue: list[tuple[float, int, TickRelay]] = []
        self._entries = count(1)
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._receive())

    def due(self, relay: TickRelay, at: float) -> None:
        """The page is due its next tick at ``at`` (the loop's clock)."""
        relay.queued = next(self._entries)
        heappush(self._queue, (at, relay.queued, relay))

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
                    self.deliver(text, started=started, now=self._loop.time())
        finally:
            try:
                await layer.group_discard(group, channel)
            except Exception:  # noqa: BLE001  leaving anyway; Redis drops it with the socket
                logger.info("could not unsubscribe from the ticks of event %s", self.event_id)

    def overloaded(self, now: float) -> bool:
        return now < self._overloaded_until

    def deliver(self, text: str, *, started: bool, now: float) -> None:
        """Offer a tick to the pages it is due to (``rules/tick_bands.py``); call the start
        hooks of pre-queue pages when it says the line has started. ``now``: the event loop's
        clock."""
        self.newest = text
        self._arrivals.append(now)
        tick = TickView.parse(text) if settings.WR_TICKS_BY_DISTANCE else None
        # Unparsed, or what the line is doing changed: every page is sent this one.
        everyone = tick is None or tick.doing != self._doing
        self._doing = tick.doing if tick is not None else None
        gap = max((b - a for a, b in pairwise(self._arrivals)), default=0.0)
        if everyone:
            pages, self._queue = list(self.relays), []
        else:
            pages, horizon = [], tick_horizon(now=now, tick_gap=gap)
            while self._queue and self._queue[0][0] <= horizon:
                _, entry, relay = heappop(self._queue)
                if entry == relay.queued and relay in self.relays:
                    pages.append(relay)
        overloaded, behind = self.overloaded(now), 0
        for relay in pages:
            if relay.behind:
                behind += 1
            relay.offer(text)
            if tick is None:
                relay.spacing = 0.0  # unread: due at the next tick, as every page
            else:
                self._spaced(relay, tick, now=now, overloaded=overloaded)
            relay.queued = next(self._entries)
            entry = (now + relay.spacing, relay.queued, relay)
            if everyone:  # every page at once: heaped once below, not page by page
                self._queue.append(entry)
            else:
                heappush(self._queue, entry)
        if everyone:
            heapify(self._queue)
        for relay in list(self.relays) if started else ():
            if relay.on_started is not None:
                try:
                    relay.on_started()
                except Exception:
                    # One page's trouble must not stop the ticks of the others.
                    logger.warning("a page's start hook failed", exc_info=True)
        due = len(pages)
        if backlogged(behind=behind, pages=due):
            if not overloaded:
                logger.warning(
                    "ticks of event %s: %d of %d pages still sending the last one; far-back "
                    "pages get fewer for %g s",
                    self.event_id,
                    behind,
                    due,
                    OVERLOAD_HOLD_SECONDS,
                )
            self._overloaded_until = now + OVERLOAD_HOLD_SECONDS

    @staticmethod
    def _spaced(relay: TickRelay, tick: TickView, *, now: float, overloaded: bool) -> None:
        """When the page, just sent a tick, is due the next one, from where this tick places
        it (a page in the front band stays there until placed again)."""
        if relay.spacing == 0.0 and now - relay.placed_at < FRONT_RECHECK_SECONDS:
            return
        relay.placed_at = now
        place = relay.place
        if relay.prequeue:
            relay.spacing = prequeue_tick_spacing(overloaded=overloaded)
        elif place is None:
            relay.spacing = 0.0
        else:
            relay.spacing = tick.spacing(
                place, front=settings.WR_TICKS_FRONT_PLACES, overloaded=overloaded
            )


_fanouts: PerEventLoop[dict[int, EventFanout]] = PerEventLoop(dict)


async def tick_relay_open(event_id: int, send: Send) -> TickRelay:
    """Start relaying the event's ticks to a page (from the next tick broadcast after this
    returns); ``tick_relay_close`` when it leaves. Raises ConnectionError when the ticks
    cannot be subscribed to (Redis unreachable): the page then polls."""
    by_event = _fanouts.get()
    fanout = by_event.get(event_id)
    if fanout is None or fanout.ended:
        fanout = by_event[event_id] = EventFanout(event_id)
    relay = TickRelay(send, fanout)
    fanout.relays.add(relay)
    fanout.due(relay, -math.inf)
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
