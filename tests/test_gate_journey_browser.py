"""A fan's whole journey to a shop behind the room's nginx gate, in a real browser (Debian's
Chromium) against the real processes: gunicorn, a Celery worker and beat, the sample shop
(tests/echo_shop.py) and deploy/nginx/gate.conf.template run by Debian's nginx
(tests/gate_rig.py).

In the order a sale goes: in safety net, with nobody in line, a fan goes from a shop URL to
that URL on the shop in one go, the room's page never showing a wait. Staff switch to the
queue; the shop is full, so the next fan, arriving at a deep shop URL, waits on the room's
page, is let in by the worker's tick when the shop frees the place, and ends on the very URL
first asked for. A second tab goes straight in with the cookie. A forged pass, a tampered one
and another on-sale's, in the URL or as the cookie, all end at the room."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from playwright.sync_api import BrowserContext, Page, Response, expect

from events.models import Event
from tests.browser import chromium
from tests.edge import needs_nginx
from tests.gate_rig import SLUG, GatedShop, gated_shop
from tests.helpers import staff_token
from tests.http import pass_complete, request
from tests.processes import wait_until

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    needs_nginx,
]

COOKIE = f"wr_pass_{SLUG}"
# Generous for a loaded 2-CPU machine: every wait below ends as soon as its condition holds.
WAIT_MS = 30_000
# Safety net with an empty line: from the shop URL to the shop, through the room.
STRAIGHT_THROUGH_SECONDS = 5.0


@dataclass(frozen=True)
class Hop:
    """One response to a navigation of the main frame, redirects included."""

    method: str
    url: str
    status: int
    location: str | None


def record_hops(context: BrowserContext) -> list[Hop]:
    hops: list[Hop] = []

    def seen(response: Response) -> None:
        req = response.request
        if req.is_navigation_request() and req.frame.parent_frame is None:
            hops.append(
                Hop(req.method, response.url, response.status, response.headers.get("location"))
            )

    context.on("response", seen)
    return hops


def shop_rendered(page: Page) -> dict[str, Any]:
    """What the echo shop answered (its JSON, as the browser shows it)."""
    return json.loads(page.locator("pre").first.inner_text())


def pass_cookie(context: BrowserContext, shop_url: str) -> str:
    (value,) = [c["value"] for c in context.cookies(shop_url) if c["name"] == COOKIE]
    return value


def tampered(token: str) -> str:
    """The pass with its claims changed (a later expiry) and its signature kept."""
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["exp"] += 3600
    changed = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{changed}.{signature}"


def forged(token: str) -> str:
    """The same claims and key id, signed with another Ed25519 key."""
    claims = jwt.decode(token, options={"verify_signature": False})
    header = jwt.get_unverified_header(token)
    return jwt.encode(claims, Ed25519PrivateKey.generate(), "EdDSA", headers=header)


def test_a_fan_goes_from_a_shop_url_through_the_room_and_back_to_it(
    make_event, tmp_path: Path
) -> None:
    with gated_shop() as rig:
        run_journey(rig, make_event, tmp_path)


def run_journey(rig: GatedShop, make_event, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    room, shop = rig.room, rig.nginx.base_url
    event = make_event(
        slug=SLUG,
        mode="safety_net",
        capacity=1,
        rate_per_minute=0,
        heartbeat_seconds=600,
        target_url=f"{shop}/",  # the shop's host: a return URL on it is kept
    )
    other = make_event(slug="other", capacity=1, rate_per_minute=0, heartbeat_seconds=600)
    key = event.integration_key
    token = staff_token("ann", superuser=True)
    rig.stack.worker()
    rig.stack.beat()
    wait_until(
        lambda: Event.objects.filter(started_at__isnull=False).count() == 2,
        timeout=30,
        what="the beat to start both lines",
    )
    # Another on-sale's valid pass, as its own fan gets it (admitted by the worker's tick).
    other_ticket = request("POST", f"{room}/api/v1/events/{other.slug}/join", {}).body["ticket"]
    other_pass = wait_until(
        lambda: request("GET", f"{room}/api/v1/tickets/{other_ticket}").body.get("pass"),
        timeout=30,
        what="the other on-sale's fan to be admitted",
    )

    # In safety net the join page is only a hop: no call to join a line (a GET joins nobody).
    hop_page = request("GET", rig.room_location("/merch/tee?size=m"))
    assert hop_page.status == 200
    assert "One moment, please" in hop_page.body and "Join the line" not in hop_page.body

    # No database from here on: the browser's event loop runs in this thread.
    with chromium() as browser:

        def new_context() -> BrowserContext:
            # The shop's certificate is self-signed.
            return browser.new_context(
                ignore_https_errors=True, locale="en-US", viewport={"width": 900, "height": 700}
            )

        # --- Safety net, nobody in line: through the room to the shop in one go. ----------
        early = new_context()
        hops = record_hops(early)
        page = early.new_page()
        url = f"{shop}/merch/tee?size=m"
        started = time.monotonic()
        page.goto(url)
        page.wait_for_url(url, timeout=WAIT_MS)
        took = time.monotonic() - started
        assert shop_rendered(page)["path"] == "/merch/tee?size=m"
        early_pass = pass_cookie(early, shop)
        assert f"{COOKIE}={early_pass}" in shop_rendered(page)["cookie"]
        assert took < STRAIGHT_THROUGH_SECONDS, took
        at_room = [h for h in hops if h.url.startswith(room)]
        # The room rendered one page, the join form that sends itself (the hop above); the
        # join and everything after it were redirects, the last one to the shop with a pass.
        assert [h.status for h in at_room if h.status == 200] == [200], hops
        assert at_room[0] == Hop("GET", rig.room_location("/merch/tee?size=m"), 200, None)
        assert at_room[1].method == "POST" and at_room[1].status == 302, hops
        assert all(300 <= h.status < 400 for h in at_room[1:]), hops
        assert at_room[-1].location == f"{url}&wr_pass={early_pass}", hops
        early.close()

        # --- Staff switch to the queue; the shop is full (capacity 1). -----------------------
        switched = request(
            "PATCH",
            f"{room}/api/v1/manage/events/{SLUG}/",
            {"mode": "queue"},
            {"Authorization": f"Token {token}"},
        )
        assert (switched.status, switched.body["mode"]) == (200, "queue"), switched.body

        # --- A deep shop URL: the room's waiting page, then the very URL, on the shop. -------
        fan = new_context()
        hops = record_hops(fan)
        page = fan.new_page()
        deep = f"{shop}/products/42?colour=red"
        page.goto(deep)
        expect(page.locator("#live")).to_have_attribute("data-status", "waiting", timeout=WAIT_MS)
        expect(page).to_have_url(f"{room}/e/{SLUG}/")
        expect(page.locator("#status-text")).to_have_text("You're next!")
        expect(page.locator("#position")).to_have_text("1")
        assert hops[0] == Hop("GET", deep, 302, rig.room_location("/products/42?colour=red"))
        page.screenshot(path=str(tmp_path / "gate-journey-waiting.png"), full_page=True)

        # The shop frees the place: the next tick lets the fan in.
        pass_complete(room, key, early_pass)
        page.wait_for_url(deep, timeout=WAIT_MS)
        fan_pass = pass_cookie(fan, shop)
        rendered = shop_rendered(page)
        assert rendered["path"] == "/products/42?colour=red"
        assert f"{COOKIE}={fan_pass}" in rendered["cookie"]
        assert "wr_pass" not in page.url
        # The room sent the fan to the URL with the pass; nginx made it the cookie and asked
        # for the URL again without it.
        assert Hop("GET", f"{deep}&wr_pass={fan_pass}", 302, deep) in hops, hops
        page.screenshot(path=str(tmp_path / "gate-journey-shop.png"), full_page=True)

        # --- A second tab: straight in with the cookie, the room never asked. ---------------
        tab = fan.new_page()
        hops.clear()
        answer = tab.goto(f"{shop}/basket?item=7")
        assert answer is not None and answer.status == 200
        assert answer.request.redirected_from is None
        assert shop_rendered(tab)["path"] == "/basket?item=7"
        assert hops == [Hop("GET", f"{shop}/basket?item=7", 200, None)], hops

        # --- Bad passes, in the URL or as the cookie: to the room. ---------------------------
        bad = {"forged": forged(fan_pass), "tampered": tampered(fan_pass), "other's": other_pass}
        for name, value in bad.items():
            for way in ("query", "cookie"):
                stranger = new_context()
                hops = record_hops(stranger)
                if way == "cookie":
                    stranger.add_cookies(
                        [{"name": COOKIE, "value": value, "url": shop, "secure": True}]
                    )
                    asked = f"{shop}/p"
                else:
                    asked = f"{shop}/p?wr_pass={value}"
                page = stranger.new_page()
                page.goto(asked)
                # In line behind the fan in the shop; the URL to come back to has no pass.
                expect(page.locator("#live")).to_have_attribute(
                    "data-status", "waiting", timeout=WAIT_MS
                )
                expect(page).to_have_url(f"{room}/e/{SLUG}/")
                assert hops[0] == Hop("GET", asked, 302, rig.room_location("/p")), (name, way)
                assert not [h for h in hops if h.url.startswith(shop) and h.status == 200]
                stranger.close()
        fan.close()
