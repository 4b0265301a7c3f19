"""How many WebSockets a client may hold, and how big a message it may send (in process, on the
real channel layer and Redis). The real server's own frame limit: test_socket_limits_server.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from config.asgi import application
from config.workers import uvicorn_config
from queueing.hot import keys
from queueing.live.sockets import address_slots
from queueing.live.ticks import broadcast_tick
from queueing.live.watchers import watchers
from queueing.rules.ticket_codec import ticket_read
from queueing.web.callers import scope_client_ip
from tests.helpers import fans_join

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://testserver")
REPLACED = {"type": "replaced", "detail": "This page was opened elsewhere."}


@pytest.fixture(autouse=True)
def _fresh_address_slots() -> Iterator[None]:
    address_slots.clear()
    yield
    address_slots.clear()


def socket(
    slug: str,
    ticket: str,
    *,
    client: str = "198.51.100.7",
    forwarded_for: str | None = None,
) -> WebsocketCommunicator:
    headers = [ORIGIN]
    if forwarded_for is not None:
        headers.append((b"x-forwarded-for", forwarded_for.encode()))
    ws = WebsocketCommunicator(application, f"/ws/events/{slug}/?ticket={ticket}", headers)
    ws.scope["client"] = (client, 50000)  # the application starts on the first input
    return ws


async def opened(ws: WebsocketCommunicator) -> WebsocketCommunicator:
    connected, _ = await ws.connect(timeout=5)
    assert connected
    assert (await ws.receive_json_from(timeout=5))["type"] == "snapshot"
    return ws


async def refused_with(ws: WebsocketCommunicator) -> int:
    """Accepted, then closed at once: the close code the page sees."""
    connected, _ = await ws.connect(timeout=5)
    assert connected  # accepted first, so that the page learns why
    closed = await ws.receive_output(timeout=5)
    assert closed["type"] == "websocket.close"
    return closed["code"]


async def replaced(ws: WebsocketCommunicator) -> bool:
    """True if the page was told it was replaced and closed with 4409."""
    message = await ws.receive_output(timeout=5)
    assert message["type"] == "websocket.send", message
    assert json.loads(message["text"]) == REPLACED
    assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 4409}
    return True


async def gets_a_tick(ws: WebsocketCommunicator) -> bool:
    message = json.loads((await ws.receive_output(timeout=5))["text"])
    return message["type"] == "tick"


def test_the_newest_sockets_on_a_ticket_win(make_event, settings, redis_client) -> None:
    settings.WR_SOCKETS_PER_TICKET = 2
    event = make_event(capacity=0)
    (ticket,) = fans_join(event.slug, 1)
    ref = ticket_read(ticket)

    async def scenario() -> None:
        first = await opened(socket(event.slug, ticket))
        second = await opened(socket(event.slug, ticket))
        assert await first.receive_nothing(timeout=0.3)  # two are allowed
        third = await opened(socket(event.slug, ticket))
        # The oldest page is told why, then closed; the two newest stay and get ticks.
        assert await replaced(first)
        await database_sync_to_async(broadcast_tick)(event_id=event.id, now=timezone.now())
        assert await gets_a_tick(second) and await gets_a_tick(third)
        assert await second.receive_nothing(timeout=0.3)
        # The ticket is still kept alive by the pages left.
        assert watchers.snapshot() == [(event.id, [ref.entry_id], event.heartbeat_seconds)]
        for ws in (first, second, third):
            await ws.disconnect()

    asyncio.run(scenario())
    assert redis_client.zcard(keys.ticket_sockets(event.id, ref.entry_id)) == 0


def test_sixty_sockets_on_one_ticket_leave_three_open(make_event) -> None:
    # What the probe did: 60 sockets on one ticket all stayed open.
    event = make_event(capacity=0)
    (ticket,) = fans_join(event.slug, 1)

    async def scenario() -> None:
        pages = [await opened(socket(event.slug, ticket)) for _ in range(60)]
        for page in pages[:-3]:
            assert await replaced(page)
        await database_sync_to_async(broadcast_tick)(event_id=event.id, now=timezone.now())
        for page in pages[-3:]:
            assert await gets_a_tick(page)
        for page in pages:
            await page.disconnect()

    asyncio.run(scenario())
    assert watchers.snapshot() == []
    assert address_slots.held("198.51.100.7") == 0


def test_a_socket_that_closes_is_taken_off_its_ticket(make_event, settings, redis_client) -> None:
    event = make_event(capacity=0)
    (ticket,) = fans_join(event.slug, 1)
    key = keys.ticket_sockets(event.id, ticket_read(ticket).entry_id)

    async def scenario() -> None:
        first = await opened(socket(event.slug, ticket))
        second = await opened(socket(event.slug, ticket))
        assert redis_client.zcard(key) == 2
        await first.disconnect()
        assert redis_client.zcard(key) == 1
        assert 0 < redis_client.ttl(key) <= 24 * 3600
        await second.disconnect()

    asyncio.run(scenario())


def test_sockets_per_address_are_capped(make_event, settings) -> None:
    settings.WR_SOCKETS_PER_ADDRESS = 2
    event = make_event(capacity=0)
    a, b, c, d = fans_join(event.slug, 4)

    async def scenario() -> None:
        held = [await opened(socket(event.slug, t, client="203.0.113.5")) for t in (a, b)]
        # A third socket from that address is refused with a code the page reads as "poll".
        assert await refused_with(socket(event.slug, c, client="203.0.113.5")) == 4429
        # IPv6: one subscriber's /64 is one address.
        v6 = [
            await opened(socket(event.slug, t, client=f"2001:db8:1:2::{i}"))
            for i, t in [(1, a), (2, b)]
        ]
        assert await refused_with(socket(event.slug, c, client="2001:db8:1:2::99")) == 4429
        # Other addresses are not affected.
        other = await opened(socket(event.slug, d, client="203.0.113.6"))
        # A socket that closes gives its place back.
        await held[0].disconnect()
        assert address_slots.held("203.0.113.5") == 1
        again = await opened(socket(event.slug, c, client="203.0.113.5"))
        for ws in (held[1], *v6, other, again):
            await ws.disconnect()

    asyncio.run(scenario())
    assert address_slots.held("203.0.113.5") == 0


def test_behind_trusted_proxies_the_forwarded_address_is_counted(make_event, settings) -> None:
    settings.WR_SOCKETS_PER_ADDRESS = 1
    settings.WR_TRUSTED_PROXY_COUNT = 1
    event = make_event(capacity=0)
    a, b, c = fans_join(event.slug, 3)
    proxy = "10.0.0.2"  # every socket reaches the app through our proxy

    async def scenario() -> None:
        # Two fans behind the one proxy are two addresses...
        first = await opened(socket(event.slug, a, client=proxy, forwarded_for="192.0.2.1"))
        second = await opened(socket(event.slug, b, client=proxy, forwarded_for="192.0.2.2"))
        # ...and what a client writes left of the address our proxy saw does not count.
        spoofed = socket(event.slug, c, client=proxy, forwarded_for="192.0.2.77, 192.0.2.1")
        assert await refused_with(spoofed) == 4429
        for ws in (first, second):
            await ws.disconnect()

    asyncio.run(scenario())


def test_the_scope_client_address_follows_the_trusted_proxy_rule(settings) -> None:
    scope = {"client": ("10.0.0.2", 1234), "headers": [(b"x-forwarded-for", b"192.0.2.9")]}
    assert scope_client_ip(scope) == "10.0.0.2"  # no trusted proxy: the header is ignored
    settings.WR_TRUSTED_PROXY_COUNT = 1
    assert scope_client_ip(scope) == "192.0.2.9"
    repeated = {
        "client": ("10.0.0.2", 1234),
        "headers": [(b"x-forwarded-for", b"192.0.2.9"), (b"X-Forwarded-For", b"192.0.2.10")],
    }
    assert scope_client_ip(repeated) == "192.0.2.10"
    assert scope_client_ip({"headers": []}) == "unknown"


@pytest.mark.parametrize(
    "frame",
    [
        {"text": "x" * (64 * 1024 + 1)},
        {"text": "é" * (32 * 1024 + 1)},  # fewer characters than the limit, more bytes
        {"bytes": b"\0" * (64 * 1024 + 1)},
    ],
    ids=["text", "multibyte-text", "bytes"],
)
def test_a_message_bigger_than_a_page_sends_closes_the_socket(make_event, frame) -> None:
    event = make_event(capacity=0)
    (ticket,) = fans_join(event.slug, 1)

    async def scenario() -> None:
        ws = await opened(socket(event.slug, ticket))
        await ws.send_input({"type": "websocket.receive", "text": "ping"})  # small: ignored
        await database_sync_to_async(broadcast_tick)(event_id=event.id, now=timezone.now())
        assert await gets_a_tick(ws)
        await ws.send_input({"type": "websocket.receive", **frame})
        assert await ws.receive_output(timeout=5) == {"type": "websocket.close", "code": 1009}
        assert watchers.snapshot() == []

    asyncio.run(scenario())


def test_the_server_refuses_big_messages_itself(settings) -> None:
    # uvicorn buffers a whole message (16 MiB by default) before the consumer sees it.
    assert uvicorn_config()["ws_max_size"] == settings.WR_WS_MAX_MESSAGE_BYTES == 64 * 1024
    assert uvicorn_config()["ws_per_message_deflate"] is False
