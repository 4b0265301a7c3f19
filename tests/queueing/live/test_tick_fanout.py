"""One subscription per event and process; every page due a tick gets it once; a slow page
skips ticks instead of holding the others up; far-back pages are due fewer."""

from __future__ import annotations

import asyncio
import json
from itertools import pairwise

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from queueing.hot.channels import event_group
from queueing.live.fanout import Place, tick_relay_close, tick_relay_open
from queueing.live.ticks import CHECKPOINT_RANKS, LINE_STARTED
from queueing.rules.layout import EventLayout, TierLayout
from queueing.rules.tick_bands import BACKLOG_MIN_PAGES


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


# ----------------------------------------------------------- ticks by distance from the front

TIER = 5
LAYOUT = EventLayout(
    event_id=987_657,
    slug="far",
    heartbeat_seconds=60,
    pace=None,
    tiers=(TierLayout(id=TIER, priority=0, share=0),),
)
KEY_OF_RANK = 1_000  # the fan of rank r holds order key r + 1,000


def _line_tick(*, fans: int, at: float, mode: str = "queue") -> str:
    """A tick as queueing/live/ticks.py builds it, of a line of ``fans`` in one tier."""
    ranks = [r for r in CHECKPOINT_RANKS if r < fans] + [fans - 1]
    return json.dumps(
        {
            "type": "tick",
            "at": at,
            "state": "open",
            "mode": mode,
            "message": None,
            "prequeue": 0,
            "queue_length": fans,
            "tiers": [
                {"id": TIER, "count": fans, "checkpoints": [[r, r + KEY_OF_RANK] for r in ranks]}
            ],
            "limits": {"rate": 60, "capacity": 0, "session": 900},
            "throughput": None,
        }
    )


def test_pages_get_ticks_by_distance_from_the_front_and_a_change_reaches_every_page(
    settings,
) -> None:
    settings.WR_TICKS_FRONT_PLACES = 10  # front: 1-10; near: 11-100 (5 s); far: 101- (10 s)

    async def scenario() -> None:
        got: dict[str, list[float]] = {}
        relays = {}
        clock = {"now": 0.0}
        for name in ("front", "near", "far", "unplaced", "prequeue"):
            got[name] = []

            async def send(text: str, name: str = name) -> None:
                got[name].append(clock["now"])

            relays[name] = await tick_relay_open(987_657, send)
        fanout = relays["front"]._fanout
        for name, rank in (("front", 3), ("near", 50), ("far", 50_000)):
            relays[name].placed(Place(layout=LAYOUT, tier_id=TIER, order_key=rank + KEY_OF_RANK))
        relays["prequeue"].placed(None, prequeue=True)
        for second in range(1, 61):
            clock["now"] = float(second)
            fanout.deliver(_line_tick(fans=100_000, at=second), started=False, now=clock["now"])
            await asyncio.sleep(0)  # the relays send
        gaps = {name: [b - a for a, b in pairwise(times)] for name, times in got.items()}
        assert len(got["front"]) == len(got["unplaced"]) == 60
        assert max(gaps["near"]) <= 5 and len(got["near"]) <= 60 / 3
        assert max(gaps["far"]) <= 10 and len(got["far"]) <= 60 / 8
        assert max(gaps["prequeue"]) <= 10 and len(got["prequeue"]) <= 60 / 8
        # Maintenance: what the line is doing changed, every page hears it at once.
        before = {name: len(times) for name, times in got.items()}
        clock["now"] = 61.0
        fanout.deliver(_line_tick(fans=100_000, at=61, mode="maintenance"), started=False, now=61)
        await asyncio.sleep(0)
        assert all(len(got[name]) == before[name] + 1 for name in got)
        for relay in relays.values():
            tick_relay_close(987_657, relay)

    async_to_sync(scenario)()


def test_a_backlog_of_pages_still_sending_stretches_the_far_bands(settings) -> None:
    settings.WR_TICKS_FRONT_PLACES = 10

    async def scenario() -> None:
        stuck = asyncio.Event()
        far_times: list[float] = []
        clock = {"now": 0.0}

        async def stuck_send(text: str) -> None:
            await stuck.wait()  # sockets whose buffers are full

        async def far_send(text: str) -> None:
            far_times.append(clock["now"])

        slow = [await tick_relay_open(987_658, stuck_send) for _ in range(BACKLOG_MIN_PAGES + 1)]
        far = await tick_relay_open(987_658, far_send)
        far.placed(Place(layout=LAYOUT, tier_id=TIER, order_key=50_000 + KEY_OF_RANK))
        fanout = far._fanout
        for second in range(1, 91):
            clock["now"] = float(second)
            fanout.deliver(_line_tick(fans=100_000, at=second), started=False, now=clock["now"])
            await asyncio.sleep(0)
        assert fanout.overloaded(clock["now"])
        gaps = [b - a for a, b in pairwise(far_times)]
        assert max(gaps) <= 30 and max(gaps) > 10  # stretched, never past 30 s
        stuck.set()
        for relay in [*slow, far]:
            tick_relay_close(987_658, relay)

    async_to_sync(scenario)()


def test_a_text_that_is_not_a_tick_goes_to_every_page_and_the_ticks_after_it_still_do(
    settings,
) -> None:
    settings.WR_TICKS_FRONT_PLACES = 10

    async def scenario() -> None:
        got: list[str] = []

        async def send(text: str) -> None:
            got.append(text)

        relay = await tick_relay_open(987_659, send)
        relay.placed(Place(layout=LAYOUT, tier_id=TIER, order_key=3 + KEY_OF_RANK))
        fanout = relay._fanout
        texts = ["not a tick", _line_tick(fans=100, at=2), _line_tick(fans=100, at=3)]
        for second, text in enumerate(texts, start=1):
            fanout.deliver(text, started=False, now=float(second))
            await asyncio.sleep(0)
        assert got == texts  # the front page: each of them
        tick_relay_close(987_659, relay)

    async_to_sync(scenario)()
