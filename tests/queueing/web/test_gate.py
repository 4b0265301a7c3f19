"""``GET /gate/{slug}/check`` (queueing/web/gate.py) on the lean ASGI path and its Django
fallback: 204 only for a valid, unexpired pass of that on-sale whose session is still on;
401 with the room's location for everything else; a session that ended is refused within
``WR_GATE_STATE_SECONDS``, without PostgreSQL on every request."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import timedelta
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from config.asgi import django_asgi_app
from events.models import Event
from queueing.beat import event_tick
from queueing.line import sessions as session_states
from queueing.models import QueueEntry
from queueing.passes import cached
from queueing.passes.signing import pass_issue, pass_key_rotate
from queueing.web.hot_paths import HotPaths
from tests.asgi import AsgiReply, asgi_call, call
from tests.helpers import fans_join, poll, shop_completes

pytestmark = pytest.mark.django_db(transaction=True)

SHOP = {"x-original-host": "shop.example", "x-original-proto": "https"}


@pytest.fixture
def hot() -> HotPaths:
    return HotPaths(django_asgi_app)


@pytest.fixture
def lean_only() -> HotPaths:
    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    return HotPaths(refuse)


def admitted_passes(make_event: Any, slug: str, count: int = 1, **fields: Any) -> list[str]:
    event = make_event(slug=slug, capacity=count, rate_per_minute=0, **fields)
    tickets = fans_join(event.slug, count)
    event_tick(event_id=event.id, now=timezone.now())
    return [poll(ticket)["pass"] for ticket in tickets]


def check(app: Any, slug: str, uri: str = "/", cookie: str | None = None, **headers: str):  # type: ignore[no-untyped-def]
    sent = {**SHOP, "x-original-uri": uri, **headers}
    if cookie is not None:
        sent["cookie"] = cookie
    return call(app, "GET", f"/gate/{slug}/check", headers=sent)


def room_location(settings: Any, slug: str, original: str) -> str:
    return f"{settings.WR_PUBLIC_URL}/e/{slug}/?return={quote(original, safe='')}"


def assert_refused(reply: AsgiReply, settings: Any, slug: str, original: str) -> None:
    assert reply.status == 401, (reply.status, reply.raw)
    assert reply.body == {"error": "unauthorized", "detail": "No valid pass for this on-sale."}
    assert reply.headers["x-waiting-room-location"] == room_location(settings, slug, original)
    assert reply.headers["cache-control"] == "private, no-store"
    assert "Cookie" in reply.headers["vary"].split(", ")  # Django's adds Accept-Language
    assert "set-cookie" not in reply.headers


def test_without_a_pass_the_fan_is_sent_to_the_room_with_the_url_asked_for(
    make_event, lean_only, settings
) -> None:
    make_event(slug="sale")
    reply = check(lean_only, "sale", "/seats/12?row=a&wr_pass=")
    assert_refused(reply, settings, "sale", "https://shop.example/seats/12?row=a")
    assert reply.headers["x-frame-options"] == "DENY"  # the room's security headers
    # No X-Original-URI: the home page.
    no_uri = call(lean_only, "GET", "/gate/sale/check", headers=SHOP)
    assert_refused(no_uri, settings, "sale", "https://shop.example/")


def test_a_pass_in_the_url_becomes_the_cookie_and_the_url_is_asked_again_without_it(
    make_event, lean_only
) -> None:
    (token,) = admitted_passes(make_event, "sale")
    started = time.time()
    reply = check(lean_only, "sale", f"/seats?row=a&wr_pass={token}&x=1")
    assert (reply.status, reply.raw) == (204, b"")
    assert reply.headers["x-waiting-room-redirect"] == "https://shop.example/seats?row=a&x=1"
    assert reply.headers["cache-control"] == "private, no-store"
    assert reply.headers["vary"] == "Cookie"
    (morsel,) = SimpleCookie(reply.headers["set-cookie"]).values()
    assert (morsel.key, morsel.value) == ("wr_pass_sale", token)
    assert (morsel["path"], morsel["httponly"], morsel["samesite"]) == ("/", True, "Lax")
    assert morsel["secure"] is True and morsel["domain"] == ""  # host-only
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    assert abs(int(morsel["max-age"]) - (expires - started)) <= 2
    # The shop's own page over plain HTTP: the cookie could not come back if it were Secure.
    plain = check(lean_only, "sale", f"/?wr_pass={token}", **{"x-original-proto": "http"})
    assert "secure" not in plain.headers["set-cookie"].lower()
    assert plain.headers["x-waiting-room-redirect"] == "http://shop.example/"


def test_the_cookie_lets_the_fan_in(make_event, lean_only) -> None:
    (token,) = admitted_passes(make_event, "sale")
    reply = check(lean_only, "sale", "/seats", cookie=f"theme=dark; wr_pass_sale={token}")
    assert (reply.status, reply.raw) == (204, b"")
    assert "set-cookie" not in reply.headers
    assert "x-waiting-room-redirect" not in reply.headers
    # A stale pass left in the URL next to a good cookie: let in, and the URL is cleaned.
    stale = check(lean_only, "sale", "/seats?wr_pass=old", cookie=f"wr_pass_sale={token}")
    assert stale.status == 204 and "set-cookie" not in stale.headers
    assert stale.headers["x-waiting-room-redirect"] == "https://shop.example/seats"


def test_every_pass_that_is_not_good_for_this_on_sale_is_refused(
    make_event, lean_only, settings
) -> None:
    (token,) = admitted_passes(make_event, "sale")
    (other,) = admitted_passes(make_event, "other")
    header, claims = (
        jwt.get_unverified_header(token),
        jwt.decode(token, options={"verify_signature": False}),
    )
    forged = jwt.encode(claims, Ed25519PrivateKey.generate(), algorithm="EdDSA", headers=header)
    unsigned = jwt.encode(claims, None, algorithm="none")
    entry = entry_of_pass(claims)
    now = timezone.now()
    expired = pass_issue(
        event_slug="sale",
        ticket_id=entry.public_id,
        tier="General",
        admitted_at=now - timedelta(hours=1),
        expires_at=now - timedelta(minutes=1),
        now=now,
    )
    bad = {
        "forged signature": forged,
        "alg none": unsigned,
        "another on-sale's pass": other,
        "expired": expired,
        "malformed": "not-a-pass",
        "truncated": token[:-3],
    }
    for name, candidate in bad.items():
        for reply in (
            check(lean_only, "sale", "/p", cookie=f"wr_pass_sale={candidate}"),
            check(lean_only, "sale", f"/p?wr_pass={quote(candidate)}"),
        ):
            assert reply.status == 401, name
            assert_refused(reply, settings, "sale", "https://shop.example/p")
    # Another on-sale's cookie on the same host is not this one's.
    assert check(lean_only, "sale", "/p", cookie=f"wr_pass_other={other}").status == 401
    # An unknown on-sale: to the room, which answers its own 404 there.
    ghost = check(lean_only, "no-such-sale", "/p", cookie=f"wr_pass_no-such-sale={token}")
    assert_refused(ghost, settings, "no-such-sale", "https://shop.example/p")


def entry_of_pass(claims: dict[str, Any]) -> QueueEntry:
    return QueueEntry.objects.get(public_id=claims["sub"])


def test_a_session_the_shop_completed_is_refused_within_the_bound(
    make_event, lean_only, settings, monkeypatch
) -> None:
    settings.WR_GATE_STATE_SECONDS = 0.5
    (token,) = admitted_passes(make_event, "sale")
    reads: list[int] = []
    read = session_states.sessions_read

    def counted(keys: Any) -> Any:
        reads.append(len(keys))
        return read(keys)

    monkeypatch.setattr(session_states, "sessions_read", counted)
    cookie = f"wr_pass_sale={token}"
    key = Event.objects.get(slug="sale").integration_key

    async def scenario() -> list[int]:
        statuses = [(await gate(lean_only, cookie)).status for _ in range(20)]
        assert reads == [1]  # twenty requests, one read: no query per request
        completed = await asyncio.to_thread(shop_completes, token, key)
        assert completed.status_code == 204
        statuses.append((await gate(lean_only, cookie)).status)  # still trusted, for now
        await asyncio.sleep(settings.WR_GATE_STATE_SECONDS + 0.05)
        statuses.append((await gate(lean_only, cookie)).status)
        return statuses

    statuses = asyncio.run(scenario())
    assert statuses == [204] * 21 + [401]
    assert 2 <= len(reads) <= 3


def test_a_status_past_half_its_time_is_read_again_without_making_the_fan_wait(
    make_event, lean_only, settings, monkeypatch
) -> None:
    settings.WR_GATE_STATE_SECONDS = 1.0
    (token,) = admitted_passes(make_event, "sale")
    reads: list[float] = []
    read = session_states.sessions_read

    def slow(keys: Any) -> Any:
        reads.append(time.monotonic())
        time.sleep(0.3)  # PostgreSQL under load
        return read(keys)

    monkeypatch.setattr(session_states, "sessions_read", slow)
    cookie = f"wr_pass_sale={token}"

    async def scenario() -> list[float]:
        await gate(lean_only, cookie)  # the first read: this request waits for it
        await asyncio.sleep(0.6)
        took = []
        for _ in range(3):
            started = time.monotonic()
            assert (await gate(lean_only, cookie)).status == 204
            took.append(time.monotonic() - started)
        await asyncio.sleep(0.4)  # the background read ends
        return took

    took = asyncio.run(scenario())
    assert max(took) < 0.15, took  # answered from the status at hand
    assert len(reads) == 2  # and read again once, in the background


async def gate(app: Any, cookie: str, slug: str = "sale") -> AsgiReply:
    headers = {**SHOP, "x-original-uri": "/", "cookie": cookie}
    return await asgi_call(app, "GET", f"/gate/{slug}/check", headers=headers)


def test_sessions_asked_for_together_are_read_in_one_query(
    make_event, lean_only, monkeypatch
) -> None:
    tokens = admitted_passes(make_event, "sale", count=30)
    reads: list[int] = []
    read = session_states.sessions_read

    def counted(keys: Any) -> Any:
        reads.append(len(keys))
        return read(keys)

    monkeypatch.setattr(session_states, "sessions_read", counted)

    async def all_at_once() -> list[int]:
        replies = await asyncio.gather(*(gate(lean_only, f"wr_pass_sale={t}") for t in tokens))
        return [reply.status for reply in replies]

    assert asyncio.run(all_at_once()) == [204] * 30
    assert sum(reads) == 30 and len(reads) <= 2, reads


def test_a_session_the_fan_left_is_refused_and_the_others_stay_in(make_event, hot) -> None:
    event = make_event(slug="sale", capacity=2, rate_per_minute=0)
    tickets = fans_join(event.slug, 2)
    event_tick(event_id=event.id, now=timezone.now())
    tokens = [poll(ticket)["pass"] for ticket in tickets]
    for token in tokens:
        assert check(hot, "sale", "/", cookie=f"wr_pass_sale={token}").status == 204
    assert Client().delete(f"/api/v1/tickets/{tickets[0]}").status_code == 204  # abandoned
    # A new process (here a new event loop) reads the session again.
    assert check(hot, "sale", "/", cookie=f"wr_pass_sale={tokens[0]}").status == 401
    assert check(hot, "sale", "/", cookie=f"wr_pass_sale={tokens[1]}").status == 204


@pytest.mark.parametrize("mode", ["passthrough", "queue"])
def test_a_pass_of_a_session_that_ended_before_a_re_entry_is_refused(
    make_event, hot, settings, mode
) -> None:
    event = make_event(slug="sale", capacity=1, rate_per_minute=0, reentry_seconds=300, mode=mode)
    (ticket,) = fans_join(event.slug, 1)
    event_tick(event_id=event.id, now=timezone.now())
    first = poll(ticket)["pass"]
    assert check(hot, "sale", "/", cookie=f"wr_pass_sale={first}").status == 204
    assert Client().delete(f"/api/v1/tickets/{ticket}").status_code == 204
    assert check(hot, "sale", "/", cookie=f"wr_pass_sale={first}").status == 401
    assert Client().post(f"/api/v1/tickets/{ticket}/reenter").status_code == 200
    event_tick(event_id=event.id, now=timezone.now())
    second = poll(ticket)["pass"]
    assert second != first
    # Admitted again: the old pass is still signed and within its exp, but of a session that
    # ended; passes/verify calls it revoked, and every path of the gate refuses it.
    verdict = Client().post("/api/v1/passes/verify", {"pass": first}, "application/json")
    assert (verdict.json()["valid"], verdict.json()["reason"]) == (False, "revoked")
    for app in (hot, django_asgi_app):
        old = check(app, "sale", "/p", cookie=f"wr_pass_sale={first}")
        assert_refused(old, settings, "sale", "https://shop.example/p")
        assert check(app, "sale", f"/p?wr_pass={first}").status == 401
        assert check(app, "sale", "/", cookie=f"wr_pass_sale={second}").status == 204


def test_postgresql_unreachable_is_503_not_500(make_event, lean_only, monkeypatch) -> None:
    (token,) = admitted_passes(make_event, "sale")

    def down(keys: Any) -> Any:
        raise OperationalError("connection refused")

    monkeypatch.setattr(session_states, "sessions_read", down)
    reply = check(lean_only, "sale", "/", cookie=f"wr_pass_sale={token}")
    assert (reply.status, reply.body["error"]) == (503, "unavailable")
    assert reply.headers["retry-after"] == "5"
    # Without a pass there is nothing to read: still the room's location.
    assert check(lean_only, "sale", "/").status == 401


def test_a_hostile_original_request_cannot_inject_a_header_or_leave_the_shop(
    make_event, lean_only, settings
) -> None:
    make_event(slug="sale")
    crlf = check(lean_only, "sale", "/a\r\nSet-Cookie: evil=1")
    assert "set-cookie" not in crlf.headers and "\r" not in crlf.headers["x-waiting-room-location"]
    assert_refused(crlf, settings, "sale", "https://shop.example/a%0D%0ASet-Cookie:%20evil=1")
    for uri in ("//evil.example/", "/\\evil.example/"):
        reply = check(lean_only, "sale", uri)
        return_url = reply.headers["x-waiting-room-location"].partition("?return=")[2]
        assert return_url.startswith(quote("https://shop.example/", safe="")), uri
    odd_host = check(lean_only, "sale", "/x", **{"x-original-host": "evil.example/@shop"})
    assert odd_host.headers["x-waiting-room-location"] == f"{settings.WR_PUBLIC_URL}/e/sale/"


def test_the_django_view_answers_as_the_lean_path_does(make_event, hot) -> None:
    (token,) = admitted_passes(make_event, "sale")
    for uri, cookie in (
        ("/p?x=1", None),
        (f"/p?wr_pass={token}", None),
        ("/p", f"wr_pass_sale={token}"),
        ("/p", "wr_pass_sale=forged"),
    ):
        lean = check(hot, "sale", uri, cookie=cookie)
        plain = check(django_asgi_app, "sale", uri, cookie=cookie)
        assert (lean.status, lean.raw) == (plain.status, plain.raw), uri
        skip = {"content-language", "vary", "content-length"} if lean.status == 204 else set()
        # The request's id: Django's middleware answers it, the application's wrapper
        # (queueing/web/request_ids.py, in front of both) for the lean path; each its own.
        skip |= {"content-language", "vary", "x-request-id"}
        assert same_second(plain.headers, skip) == same_second(lean.headers, skip), uri


def same_second(headers: dict[str, str], skip: set[str]) -> dict[str, str]:
    """The headers less ``skip``, and the cookie's Max-Age (the two answers may straddle a
    second) as "N"."""
    kept = {name: value for name, value in headers.items() if name not in skip}
    if "set-cookie" in kept:
        kept["set-cookie"] = re.sub(r"Max-Age=\d+", "Max-Age=N", kept["set-cookie"])
    return kept


def test_a_key_rotated_in_is_read_again_but_a_forged_kid_cannot_make_every_request_read(
    make_event, lean_only, monkeypatch
) -> None:
    monkeypatch.setattr(cached, "KEYS_REFRESH_SECONDS", 0.3)
    (token,) = admitted_passes(make_event, "sale")
    assert check(lean_only, "sale", "/", cookie=f"wr_pass_sale={token}").status == 204
    reads: list[int] = []
    read = cached.published_keys

    def counted(*, now: Any) -> Any:
        reads.append(1)
        return read(now=now)

    monkeypatch.setattr(cached, "published_keys", counted)
    header, claims = (
        jwt.get_unverified_header(token),
        jwt.decode(token, options={"verify_signature": False}),
    )
    for n in range(20):
        forged = jwt.encode(
            claims, Ed25519PrivateKey.generate(), "EdDSA", headers={**header, "kid": f"k{n}"}
        )
        assert check(lean_only, "sale", "/", cookie=f"wr_pass_sale={forged}").status == 401
    assert len(reads) <= 1  # twenty unknown kids within the refresh interval: one read at most
    assert cached._verified.keys() == [token]  # and no forged token is remembered

    # An emergency rotation (signing at once, not 10 minutes later): its passes are let in
    # once the keys are read again, KEYS_REFRESH_SECONDS after the last read at the latest.
    time.sleep(0.35)
    now = timezone.now()
    pass_key_rotate(now=now, activate_in=timedelta(0))
    entry = entry_of_pass(claims)
    rotated = pass_issue(
        event_slug="sale",
        ticket_id=entry.public_id,
        tier="General",
        admitted_at=entry.admitted_at,
        expires_at=entry.pass_expires_at,
        now=now,
    )
    assert jwt.get_unverified_header(rotated)["kid"] != header["kid"]
    assert check(lean_only, "sale", "/", cookie=f"wr_pass_sale={rotated}").status == 204
