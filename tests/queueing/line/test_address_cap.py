"""One client address cannot hold hundreds of places: the on-sale's optional
``max_live_per_address`` (queueing/line/joining.py, under the chain head's lock)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone
from django.utils.crypto import salted_hmac

from config.asgi import django_asgi_app
from queueing.line import joining
from queueing.line.joining import JoinRequest, JoinResult, entry_join_many
from queueing.models import QueueEntry
from queueing.rules.errors import AddressLimited
from queueing.rules.line_limits import within_address_cap
from queueing.web.hot_paths import HotPaths
from tests.asgi import asgi_call
from tests.helpers import STAFF_API, join, staff_client

pytestmark = pytest.mark.django_db

NO_JOIN_LIMITS = override_settings(WR_JOIN_LIMIT_PER_IP=0, WR_JOIN_LIMIT_PER_IDENTITY=0)


def _digest(address: str) -> str:
    return salted_hmac("waitingroom.address", address, algorithm="sha256").hexdigest()


@NO_JOIN_LIMITS
def test_the_cap_is_off_by_default_and_the_address_is_kept_as_a_digest(make_event) -> None:
    event = make_event(capacity=0)
    assert event.max_live_per_address == 0
    assert [join(Client(), event.slug).status_code for _ in range(8)] == [201] * 8
    assert set(QueueEntry.objects.values_list("address", flat=True)) == {_digest("127.0.0.1")}
    # Keyed: a plain hash of the address, which anyone can recompute, is not what is kept.
    plain = hashlib.sha256(b"address:127.0.0.1").hexdigest()
    assert not QueueEntry.objects.filter(address=plain).exists()


@NO_JOIN_LIMITS
def test_a_third_place_from_one_address_is_refused(make_event) -> None:
    event = make_event(capacity=0, max_live_per_address=2)
    first, second = (join(Client(), event.slug) for _ in range(2))
    assert (first.status_code, second.status_code) == (201, 201)
    refused = join(Client(), event.slug)
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert "network address" in refused.json()["detail"]
    assert int(refused["Retry-After"]) >= 1
    assert QueueEntry.objects.count() == 2
    # Another address is not affected.
    assert join(Client(REMOTE_ADDR="203.0.113.9"), event.slug).status_code == 201
    # One of the address's places ending makes room.
    Client().delete(f"/api/v1/tickets/{first.json()['ticket']}")
    assert join(Client(), event.slug).status_code == 201
    assert join(Client(), event.slug).status_code == 429


@NO_JOIN_LIMITS
def test_a_fan_at_the_cap_who_joins_again_gets_their_ticket(make_event) -> None:
    event = make_event(capacity=0, max_live_per_address=1)
    fan = Client()
    first = join(fan, event.slug)
    again = join(fan, event.slug)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["ticket"] == first.json()["ticket"]
    assert join(Client(), event.slug).status_code == 429


@NO_JOIN_LIMITS
def test_an_ipv6_slash_64_is_one_address(make_event) -> None:
    event = make_event(capacity=0, max_live_per_address=2)
    statuses = [
        join(Client(REMOTE_ADDR=f"2001:db8:1:2::{i}"), event.slug).status_code for i in range(1, 4)
    ]
    assert statuses == [201, 201, 429]
    assert join(Client(REMOTE_ADDR="2001:db8:1:3::1"), event.slug).status_code == 201


@NO_JOIN_LIMITS
def test_admitted_fans_count_until_their_session_ends(make_event) -> None:
    event = make_event(capacity=0, max_live_per_address=1)
    ticket = join(Client(), event.slug).json()["ticket"]
    QueueEntry.objects.update(status="admitted", admitted_at=timezone.now())
    assert join(Client(), event.slug).status_code == 429
    Client().delete(f"/api/v1/tickets/{ticket}")  # abandoned
    assert join(Client(), event.slug).status_code == 201


@NO_JOIN_LIMITS
def test_the_waiting_page_keeps_the_same_cap(make_event) -> None:
    event = make_event(capacity=0, max_live_per_address=1)
    assert Client().post(f"/e/{event.slug}/").status_code == 302
    refused = Client().post(f"/e/{event.slug}/")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert join(Client(), event.slug).status_code == 429


def test_a_fan_the_cap_refuses_takes_no_place_in_the_line_others_are_counted_by(
    make_event,
) -> None:
    # Room for two in the line: the second fan of address a is refused by the cap, so the
    # fan of address b still fits (and is not told queue_full for a place nobody took).
    event = make_event(capacity=0, max_live_per_address=1, max_queue_length=2)
    now = timezone.now()
    a, b = _digest("198.51.100.1"), _digest("198.51.100.2")
    outcomes = entry_join_many(
        [
            JoinRequest(event=event, identity=f"fan-{i}", access_code=None, now=now, address=x)
            for i, x in enumerate([a, a, b])
        ]
    )
    kinds = [
        "created" if isinstance(o, JoinResult) and o.created else type(o).__name__ for o in outcomes
    ]
    assert kinds == ["created", "AddressLimited", "created"]


def test_a_batch_is_counted_as_if_its_joins_came_one_after_another(make_event) -> None:
    event = make_event(capacity=0, max_live_per_address=2)
    now = timezone.now()
    a, b = _digest("198.51.100.1"), _digest("198.51.100.2")

    def request(identity: str, address: str | None) -> JoinRequest:
        return JoinRequest(
            event=event, identity=identity, access_code=None, now=now, address=address
        )

    entry_join_many([request("early", a)])
    outcomes = entry_join_many(
        [
            request("a1", a),
            request("b1", b),
            request("a2", a),  # a already holds "early" and "a1": refused
            request("a1", a),  # a1 again: the ticket it just got
            request("b2", b),
            request("b3", b),  # refused
            request("nobody", None),  # no address: never counted
        ]
    )
    kinds = [
        "created" if isinstance(o, JoinResult) and o.created else type(o).__name__ for o in outcomes
    ]
    assert kinds == [
        "created",
        "created",
        "AddressLimited",
        "JoinResult",
        "created",
        "AddressLimited",
        "created",
    ]
    assert outcomes[3].answer.ticket == outcomes[0].answer.ticket
    assert isinstance(outcomes[2], AddressLimited) and outcomes[2].retry_after
    assert QueueEntry.objects.filter(address=a).count() == 2
    assert QueueEntry.objects.filter(address=b).count() == 2


def test_the_cap_rule() -> None:
    assert within_address_cap(["a", "a", "a"], held={}, cap=0) == [True] * 3
    assert within_address_cap(["a", "b", "a", None, "a"], held={"a": 1}, cap=2) == [
        True,
        True,
        False,
        True,
        False,
    ]


@pytest.mark.django_db(transaction=True)
@NO_JOIN_LIMITS
def test_a_burst_on_the_lean_path_gets_exactly_the_cap(make_event) -> None:
    event = make_event(capacity=0, max_live_per_address=3)
    hot = HotPaths(django_asgi_app)

    async def burst() -> list[Any]:
        return await asyncio.gather(
            *(
                asgi_call(hot, "POST", f"/api/v1/events/{event.slug}/join", body=b"{}")
                for _ in range(20)
            )
        )

    statuses = [reply.status for reply in asyncio.run(burst())]
    assert statuses.count(201) == 3
    assert statuses.count(429) == 17
    assert QueueEntry.objects.filter(event=event).count() == 3


@pytest.mark.django_db(transaction=True)
def test_batches_of_two_processes_cannot_both_fill_the_cap(make_event, monkeypatch) -> None:
    """The count is taken under the chain head's lock: a second batch counts after the first
    committed. Were it counted before the lock, both would meet at the barrier below having
    counted nothing, and both would place their fans."""
    event = make_event(capacity=0, max_live_per_address=3)
    address = _digest("198.51.100.1")
    barrier = threading.Barrier(2)
    real_count = joining.live_per_address

    def counted_together(*args: Any) -> Any:
        try:
            barrier.wait(timeout=1)
        except threading.BrokenBarrierError:
            pass  # the other batch is waiting for the lock: it counts after this one commits
        return real_count(*args)

    monkeypatch.setattr(joining, "live_per_address", counted_together)

    def batch(name: str) -> list[Any]:
        try:
            return entry_join_many(
                [
                    JoinRequest(
                        event=event,
                        identity=f"{name}-{i}",
                        access_code=None,
                        now=timezone.now(),
                        address=address,
                    )
                    for i in range(3)
                ]
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = [o for group in pool.map(batch, ["one", "two"]) for o in group]
    assert sum(isinstance(o, JoinResult) for o in outcomes) == 3
    assert sum(isinstance(o, AddressLimited) for o in outcomes) == 3
    assert QueueEntry.objects.filter(address=address).count() == 3


def test_staff_set_the_cap_through_the_api(make_event) -> None:
    event = make_event()
    staff = staff_client("ann", "change_event", api=True, token=True)
    url = f"{STAFF_API}{event.slug}/"
    assert staff.get(url).json()["max_live_per_address"] == 0
    changed = staff.patch(url, {"max_live_per_address": 4}, format="json")
    assert changed.status_code == 200
    assert changed.json()["max_live_per_address"] == 4
    event.refresh_from_db()
    assert event.max_live_per_address == 4
    bad = staff.patch(url, {"max_live_per_address": -1}, format="json")
    assert bad.status_code == 400
    assert "max_live_per_address" in bad.json()["fields"]
