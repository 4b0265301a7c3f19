"""The demo shop checks passes the way a shop should: offline (JWKS), then online with the room.

The shop's calls to the room are real HTTP to WR_PUBLIC_URL, here pytest-django's live server
(the same Django, the same test database); the fan's browser is the in-process test Client.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.parse

import pytest
from django.test import Client
from django.utils import timezone

from queueing.beat import event_tick
from queueing.web import demo_shop
from tests.helpers import fans_join, poll, shop_completes, statuses

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop(live_server, settings, make_event):
    """An on-sale whose shop is the demo shop, the room at the live server, one admitted fan."""
    settings.WR_PUBLIC_URL = live_server.url  # before any pass is signed: it is their `iss`
    # Each test's database has new pass keys: the shop starts with an empty JWKS cache, as a
    # shop process would (in production, rotated keys are published before they sign).
    demo_shop._jwks_client.cache_clear()
    event = make_event(
        slug="demo", capacity=2, rate_per_minute=0, target_url=f"{live_server.url}/shop/demo/"
    )
    tickets = fans_join(event.slug, 1)
    event_tick(event_id=event.id, now=timezone.now())
    status = poll(tickets[0])
    assert status["status"] == "admitted"
    return event, tickets[0], status


def shop_page(redirect_url: str) -> tuple[Client, object]:
    parts = urllib.parse.urlsplit(redirect_url)
    browser = Client()
    return browser, browser.get(f"{parts.path}?{parts.query}")


def buy(browser: Client, page, token: str, outcome: str = "completed"):
    csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content).group(1)
    return browser.post(
        "/shop/demo/complete",
        {"csrfmiddlewaretoken": csrf.decode(), "wr_pass": token, "outcome": outcome},
    )


def test_a_live_pass_opens_the_shop_and_completes_once(shop) -> None:
    _event, ticket, status = shop
    browser, page = shop_page(status["redirect_url"])
    assert page.status_code == 200
    assert b"verified offline" in page.content and b"Complete purchase" in page.content
    assert page["Cache-Control"] == "private, no-store"  # the page holds the pass
    done = buy(browser, page, status["pass"])
    assert b"Thank you for your order" in done.content
    assert statuses([ticket]) == ["completed"]
    # The same form sent again does not sell twice: the room says the pass is used.
    again = buy(browser, page, status["pass"])
    assert again.status_code == 403
    assert b"Thank you" not in again.content and b"completed" in again.content


def test_a_pass_completed_through_the_api_is_refused_by_the_shop(shop) -> None:
    event, _ticket, status = shop
    completed = shop_completes(status["pass"], event.integration_key)
    assert completed.status_code == 204
    _browser, page = shop_page(status["redirect_url"])
    assert page.status_code == 403
    assert b"Complete purchase" not in page.content
    assert b"the waiting room says: completed" in page.content


def test_a_pass_the_fan_gave_up_is_refused_by_the_shop(shop) -> None:
    _event, ticket, status = shop
    assert Client().delete(f"/api/v1/tickets/{ticket}").status_code in (200, 204)
    assert statuses([ticket]) == ["abandoned"]
    _browser, page = shop_page(status["redirect_url"])
    assert page.status_code == 403
    assert b"the waiting room says: revoked" in page.content


def test_the_shop_refuses_when_the_room_cannot_confirm(shop, monkeypatch) -> None:
    _event, ticket, status = shop
    browser, page = shop_page(status["redirect_url"])  # the JWKS is fetched and cached
    assert page.status_code == 200

    def unreachable(*args, **kwargs):
        raise urllib.error.URLError("connection refused")

    monkeypatch.setattr(demo_shop.urllib.request, "urlopen", unreachable)
    _browser, again = shop_page(status["redirect_url"])
    assert again.status_code == 503
    assert b"could not confirm your pass" in again.content
    assert buy(browser, page, status["pass"]).status_code == 503
    assert statuses([ticket]) == ["admitted"]
