"""One subscription per event and process; every page gets each tick once; a slow page
skips ticks instead of holding the others up."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from queueing.hot.channels import event_group
from queueing.live.fanout import tick_relay_close, tick_relay_open
from queueing.live.ticks import LINE_STARTED


def _tick(text: str) -> dict[str, str]:
    return {"type": "line.tick", "text": text}


def test_every_page_gets_each_tick_and_a_stuck_page_holds_nobody_up() -> None:
    async def scenario() -> None:
        layer = get_channel_layer()
        fast: list[str] = []
        stuck_started = asyncio.Event()
        release = asyncio.Event()
        slow: list[str] = []

        async def fast_send(text: str) -> None:
            fast.append(text)

        async def stuck_send(text: str) -> None:
            slow.append(text)
            stuck_started.set()
            await release.wait()  # a socket whose buffer is full

        relays = [
            await tick_relay_open(987_654, fast_send),
            await tick_relay_open(987_654, stuck_send),
        ]
        await layer.group_send(event_group(987_654), _tick("t1"))
        await asyncio.wait_for(stuck_started.wait(), 5)
        for text in ("t2", "t3", "t4"):
            await layer.group_send(event_group(987_654), _tick(text))
        for _ in range(100):
            if fast[-1:] == ["t4"]:
                break
            await asyncio.sleep(0.02)
        # Not held up by the stuck page (ticks sent back to back may be coalesced: a page
        # only ever needs the newest).
        assert fast[0] == "t1" and fast[-1] == "t4"
        release.set()
        for _ in range(100):
            if slow[-1:] == ["t4"]:
                break
            await asyncio.sleep(0.02)
        assert slow == ["t1", "t4"]  # only the newest once it could take one
        for relay in relays:
            tick_relay_close(987_654, relay)

    async_to_sync(scenario)()


def test_a_closed_page_gets_nothing_more() -> None:
    async def scenario() -> None:
        layer = get_channel_layer()
        got: list[str] = []

        async def send(text: str) -> None:
            got.append(text)

        relay = await tick_relay_open(987_655, send)
        await layer.group_send(event_group(987_655), _tick("before"))
        for _ in range(100):
            if got:
                break
            await asyncio.sleep(0.02)
        tick_relay_close(987_655, relay)
        await layer.group_send(event_group(987_655), _tick("after"))
        await asyncio.sleep(0.3)
        assert got == ["before"]

    async_to_sync(scenario)()


def test_ticks_resume_after_the_subscription_is_lost(monkeypatch) -> None:
    from queueing.live import fanout as tick_fanout

    monkeypatch.setattr(tick_fanout, "RESUBSCRIBE_SECONDS", 0.05)

    async def scenario() -> None:
        layer = get_channel_layer()
        real_receive = layer.receive
        failures = [ConnectionError("Redis went away")]

        async def flaky_receive(channel: str) -> dict[str, str]:
            if failures:
                raise failures.pop()
            return await real_receive(channel)

        monkeypatch.setattr(layer, "receive", flaky_receive)
        got: list[str] = []

        async def send(text: str) -> None:
            got.append(text)

        relay = await tick_relay_open(987_656, send)
        for attempt in range(100):
            await layer.group_send(event_group(987_656), _tick(f"t{attempt}"))
            await asyncio.sleep(0.05)
            if got:
                break
        assert got, "no tick after the subscription came back"
        tick_relay_close(987_656, relay)

    async_to_sync(scenario)()


def test_pages_waiting_for_the_start_hear_of_it_and_one_failing_hook_stops_no_ticks() -> None:
    async def scenario() -> None:
        layer = get_channel_layer()
        received: list[str] = []
        started: list[str] = []

        async def send(text: str) -> None:
            received.append(text)

        def broken() -> None:
            raise RuntimeError("a page's hook failed")

        waiting = await tick_relay_open(987_656, send)
        failing = await tick_relay_open(987_656, send)
        waiting.on_started = lambda: started.append("waiting")
        failing.on_started = broken
        for state in ("prequeue", "open", "closed"):
            # As the room's tick sends it (queueing/live/ticks.py).
            await layer.group_send(
                event_group(987_656),
                {**_tick(f"tick {state}"), "started": state in LINE_STARTED},
            )
            for _ in range(100):
                if len(received) == 2 * (1 + ("prequeue", "open", "closed").index(state)):
                    break
                await asyncio.sleep(0.02)
        assert started == ["waiting"]  # at "open" only: not before the start, nor once closed
        assert len(received) == 6  # every page got every tick, the failing hook's too
        for relay in (waiting, failing):
            tick_relay_close(987_656, relay)

    async_to_sync(scenario)()
