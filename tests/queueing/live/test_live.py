"""The waiting page's WebSocket, in process (WebsocketCommunicator on the real channel layer)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

import pytest
import redis
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from config.asgi import application
from queueing import in_process
from queueing.beat import event_tick
from queueing.line import reads
from queueing.line.place_links import place_link_claim
from queueing.live.ticks import broadcast_tick
from queueing.live.watchers import watchers
from queueing.models import QueueEntry
from queueing.rules.layout import rank_from_checkpoints
from queueing.rules.ticket_codec import TicketRef, ticket_issue
from queueing.web.consumers import START_SPREAD_SECONDS
from staff.services import event_pause
from tests.helpers import entry_of, fans_join, place_link_for, waiting_entries

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://testserver")]


def socket(slug: str, ticket: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, f"/ws/events/{slug}/?ticket={ticket}", ORIGIN)


def test_snapshot_on_connect_then_ticks(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=60)
    tickets = fans_join(event.slug, 5)
    order_key = entry_of(tickets[3]).order_key

    async def scenario():
        ws = socket(event.slug, tickets[3])
        connected, _ = await ws.connect()
        assert connected
        snapshot = await ws.receive_json_from(timeout=5)
        assert snapshot["type"] == "snapshot"
        assert (snapshot["status"], snapshot["position"], snapshot["queue_length"]) == (
            "waiting",
            4,
            5,
        )
        assert snapshot["order_key"] == order_key
        assert snapshot["eta"]["p50"] > 0
        await database_sync_to_async(broadcast_tick)(event_id=event.id, now=timezone.now())
        tick = await ws.receive_json_from(timeout=5)
        assert tick["type"] == "tick"
        (tier,) = tick["tiers"]
        assert tier["count"] == 5
        rank = rank_from_checkpoints([tuple(c) for c in tier["checkpoints"]], snapshot["order_key"])
        assert rank + 1 == 4
        await ws.disconnect()

    asyncio.run(scenario())


def test_an_admitted_fan_is_told_where_to_go(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0)
    (ticket,) = fans_join(event.slug, 1)

    async def scenario():
        ws = socket(event.slug, ticket)
        await ws.connect()
        await ws.receive_json_from(timeout=5)
        await database_sync_to_async(event_tick)(event_id=event.id, now=timezone.now())
        message = await ws.receive_json_from(timeout=5)
        assert message["type"] == "admitted"
        assert "wr_pass=" in message["redirect_url"]
        await ws.disconnect()

    asyncio.run(scenario())


def test_a_prequeue_page_is_sent_its_shuffled_place_once_the_line_starts(make_event) -> None:
    starts = timezone.now() + timedelta(seconds=30)
    event = make_event(starts_at=starts, capacity=0, rate_per_minute=0, heartbeat_seconds=600)
    tickets = fans_join(event.slug, 20)
    # Paused: the line starts (the shuffle) but nobody is let in while we look.
    event_pause(event=event, actor="test", now=timezone.now())

    async def scenario() -> None:
        ws = socket(event.slug, tickets[7])
        await ws.connect()
        first = await ws.receive_json_from(timeout=5)
        assert first["status"] == "prequeue"
        # Before the start, ticks are only ticks. (Sent until one arrives: the page's relay
        # subscribes just after its snapshot, and a tick published before that is not its.)
        for _ in range(20):
            await database_sync_to_async(broadcast_tick)(event_id=event.id, now=timezone.now())
            if not await ws.receive_nothing(timeout=0.5):
                break
        assert (await ws.receive_json_from(timeout=5))["type"] == "tick"
        assert await ws.receive_nothing(timeout=START_SPREAD_SECONDS + 0.5)
        # The start: the shuffle, then a tick that says the line is open.
        later = starts + timedelta(seconds=1)
        await database_sync_to_async(event_tick)(event_id=event.id, now=later)
        await database_sync_to_async(broadcast_tick)(event_id=event.id, now=later)
        placed = await next_of(ws, "snapshot", timeout=START_SPREAD_SECONDS + 3)
        entry = await database_sync_to_async(entry_of)(tickets[7])
        assert placed["status"] == "waiting"
        assert placed["order_key"] == entry.order_key
        assert placed["tick"]["state"] == "paused"  # the tick that said the line started
        assert placed["position"] == 1 + await database_sync_to_async(ahead_of)(entry)
        # Placed once: further ticks are only ticks.
        await database_sync_to_async(broadcast_tick)(event_id=event.id, now=later)
        assert (await ws.receive_json_from(timeout=5))["type"] == "tick"
        assert await ws.receive_nothing(timeout=START_SPREAD_SECONDS + 0.5)
        await ws.disconnect()

    asyncio.run(scenario())


def test_the_ticket_a_place_had_before_it_moved_gets_4410_and_never_a_pass(make_event) -> None:
    """Issue 28, item 4: the first browser's socket, opened again with its old ticket, was
    sent the snapshot (with ``redirect_url`` once admitted) like the new browser's."""
    event = make_event(capacity=1, rate_per_minute=0, target_url="https://shop.example/")
    (old,) = fans_join(event.slug, 1)
    entry = entry_of(old)
    token = place_link_for(entry)

    async def refused(ticket: str) -> None:
        ws = socket(event.slug, ticket)
        connected, _ = await ws.connect()
        assert connected
        assert await ws.receive_json_from(timeout=5) == {"type": "moved"}
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4410}

    async def scenario() -> None:
        laptop = socket(event.slug, old)
        await laptop.connect()
        assert (await laptop.receive_json_from(timeout=5))["status"] == "waiting"
        claimed = await database_sync_to_async(place_link_claim)(
            token=token, event_id=event.id, now=timezone.now()
        )
        # The open page is told at once; opened again, its ticket is refused.
        assert await next_of(laptop, "moved", timeout=5) == {"type": "moved"}
        assert await laptop.receive_output(timeout=5) == {"type": "websocket.close", "code": 4410}
        await refused(old)
        phone = socket(event.slug, claimed.ticket)
        await phone.connect()
        assert (await phone.receive_json_from(timeout=5))["status"] == "waiting"
        await database_sync_to_async(event_tick)(event_id=event.id, now=timezone.now())
        let_in = await next_of(phone, "admitted", timeout=5)
        assert "wr_pass=" in let_in["redirect_url"]
        await refused(old)  # admitted now: still nothing, least of all where to go
        await phone.disconnect()

    asyncio.run(scenario())


async def next_of(ws: WebsocketCommunicator, kind: str, *, timeout: float) -> dict:
    """The next message of ``kind``, skipping ticks."""
    deadline = time.monotonic() + timeout
    while True:
        message = await ws.receive_json_from(timeout=max(0.1, deadline - time.monotonic()))
        if message["type"] == kind:
            return message
        assert message["type"] == "tick", message


def ahead_of(entry) -> int:
    return QueueEntry.objects.filter(
        event_id=entry.event_id, status="waiting", order_key__lt=entry.order_key
    ).count()


@pytest.mark.parametrize("bad", ["forged.ticket", "1-1-1.AAAA", "", "%00"])
def test_a_bad_ticket_closes_the_socket_with_4401(make_event, bad) -> None:
    event = make_event()

    async def scenario():
        ws = socket(event.slug, bad)
        await ws.connect()
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}

    asyncio.run(scenario())


def test_a_ticket_whose_entry_is_gone_closes_with_4404(make_event) -> None:
    event = make_event()
    tier = event.tiers.get()
    # Signed by us, for a real event and tier, but for an entry the database does not have
    # (a database restored from an older backup, say).
    ticket = ticket_issue(TicketRef(entry_id=987_654_321, event_id=event.id, tier_id=tier.id))

    async def scenario():
        ws = socket(event.slug, ticket)
        connected, _ = await ws.connect()
        assert connected
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
        assert watchers.snapshot() == []  # nobody keeps the gone ticket alive

    asyncio.run(scenario())


def test_a_ticket_for_another_event_closes_with_4401(make_event) -> None:
    one, other = make_event(slug="one"), make_event(slug="other")
    (ticket,) = fans_join(one.slug, 1)

    async def scenario():
        ws = socket(other.slug, ticket)
        await ws.connect()
        assert (await ws.receive_output(timeout=5))["code"] == 4401

    asyncio.run(scenario())


def test_a_foreign_origin_is_refused(make_event) -> None:
    event = make_event()
    (ticket,) = fans_join(event.slug, 1)

    async def scenario():
        ws = WebsocketCommunicator(
            application,
            f"/ws/events/{event.slug}/?ticket={ticket}",
            [(b"origin", b"https://evil.example")],
        )
        connected, _ = await ws.connect()
        assert not connected

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "headers",
    [
        [],  # no Origin at all: a script outside any browser page
        [(b"origin", b"null")],  # sandboxed frames and file:// pages
        [(b"origin", b"http://testserver.evil.example")],
        [(b"origin", b"http://evil.example.testserver")],
        [(b"origin", b"http://evil.example"), (b"host", b"testserver")],
    ],
    ids=["missing", "null", "lookalike-suffix", "lookalike-prefix", "foreign-with-good-host"],
)
def test_sockets_without_our_origin_are_refused(make_event, headers) -> None:
    event = make_event()
    (ticket,) = fans_join(event.slug, 1)

    async def scenario():
        ws = WebsocketCommunicator(
            application, f"/ws/events/{event.slug}/?ticket={ticket}", headers
        )
        connected, _ = await ws.connect()
        assert not connected
        # The same ticket with our Origin is let in: the refusal above is the Origin's alone.
        ours = socket(event.slug, ticket)
        connected, _ = await ours.connect()
        assert connected
        await ours.disconnect()

    asyncio.run(scenario())


def _channel_messages_during_one_tick(event, settings) -> tuple[int, int]:
    layer = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    # The channel layer's own Redis (CHANNELS_REDIS_URL): on a cluster, not the hot index's.
    pubsub = redis.Redis.from_url(layer["hosts"][0]["address"]).pubsub()
    prefix = layer["prefix"]
    pubsub.psubscribe(f"{prefix}*")
    pubsub.get_message(timeout=1)  # the subscription confirmation
    assert broadcast_tick(event_id=event.id, now=timezone.now())
    count, size, deadline = 0, 0, time.monotonic() + 1.0
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message and message["type"] == "pmessage":
            count += 1
            size += len(message["data"])
    pubsub.close()
    return count, size


@pytest.mark.django_db(transaction=False)
def test_messages_per_tick_stay_constant_from_10_to_10000_fans(make_event, settings) -> None:
    from queueing.line.index_sync import hot_index_rebuild

    small = make_event(slug="small", heartbeat_seconds=3600)
    fans_join(small.slug, 10)
    big = make_event(slug="big", heartbeat_seconds=3600)
    waiting_entries(big, big.tiers.get(), 10_000, prefix="bulk-")
    assert hot_index_rebuild(event_id=big.id)
    small_count, small_size = _channel_messages_during_one_tick(small, settings)
    big_count, big_size = _channel_messages_during_one_tick(big, settings)
    print(f"tick messages: 10 fans {small_count} ({small_size} B),", end=" ")
    print(f"10000 fans {big_count} ({big_size} B)")
    assert small_count == big_count == 1
    # The sketch grows with log(n), not n: a thousand times the fans, a few times the bytes.
    assert big_size < 5 * small_size
    payload = json.loads(json.dumps({"n": big_size}))
    assert payload["n"] < 8_000


def test_a_database_outage_at_connect_asks_the_page_to_try_again(make_event, monkeypatch) -> None:
    from django.db import OperationalError

    event = make_event(capacity=0)
    (ticket,) = fans_join(event.slug, 1)
    in_process.clear_all()

    def unreachable(event_id: int) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(reads, "_read_layout", unreachable)

    async def scenario() -> None:
        ws = socket(event.slug, ticket)
        connected, _ = await ws.connect()
        assert connected
        closed = await ws.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": 1013}

    asyncio.run(scenario())


def test_a_page_that_cannot_get_ticks_is_closed_and_leaves_nothing_behind(
    make_event, monkeypatch
) -> None:
    from queueing.web import consumers

    event = make_event(capacity=0)
    (ticket,) = fans_join(event.slug, 1)

    async def no_ticks(event_id: int, send: object) -> None:
        raise ConnectionError("Redis unreachable")

    monkeypatch.setattr(consumers, "tick_relay_open", no_ticks)

    async def scenario() -> None:
        ws = socket(event.slug, ticket)
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=5))["type"] == "snapshot"
        with pytest.raises(ConnectionError):
            await ws.wait(timeout=5)
        assert watchers.snapshot() == []  # nobody keeps this ticket alive any more

    asyncio.run(scenario())


def test_the_last_page_to_leave_ends_the_events_subscription(make_event) -> None:
    from queueing.live import fanout as tick_fanout

    event = make_event(capacity=0)
    tickets = fans_join(event.slug, 2)

    async def scenario() -> None:
        pages = [socket(event.slug, t) for t in tickets]
        for page in pages:
            assert (await page.connect())[0]
            assert (await page.receive_json_from(timeout=5))["type"] == "snapshot"
        fanouts = tick_fanout._fanouts.get()
        for _ in range(100):  # each page opens its relay just after its snapshot
            if event.id in fanouts and len(fanouts[event.id].relays) == 2:
                break
            await asyncio.sleep(0.02)
        assert len(fanouts[event.id].relays) == 2
        await pages[0].disconnect()
        assert len(fanouts[event.id].relays) == 1
        await pages[1].disconnect()
        assert event.id not in fanouts

    asyncio.run(scenario())
