"""Deep links back: the URL a fan first asked for comes with the join (``return`` in the body,
``/e/{slug}/?return=<url>`` on the page), is kept with the entry on both join paths, and is
where the admitted fan goes when its host is allowed; anything else ends at ``target_url``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from config.asgi import application, django_asgi_app
from events.models import Event
from queueing.web.hot_paths import HotPaths
from tests.asgi import call
from tests.helpers import entry_of, join, new_fan, poll, tick

TARGET = "https://shop.example/checkout"
DEEP = "https://shop.example/events/42/seats?block=C"


def admitted_redirect(event: Event, ticket: str) -> str:
    tick(event)
    body = poll(ticket)
    assert body["status"] == "admitted", body
    return body["redirect_url"]


@pytest.mark.django_db
def test_the_django_join_keeps_the_return_url_and_the_pass_goes_back_to_it(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, target_url=TARGET)
    response = join(new_fan(), event.slug, {"return": DEEP})
    assert response.status_code == 201
    ticket = response.json()["ticket"]
    assert entry_of(ticket).return_url == DEEP
    redirect = admitted_redirect(event, ticket)
    assert redirect.startswith(DEEP + "&wr_pass=")
    assert redirect.endswith(poll(ticket)["pass"])


@pytest.mark.django_db(transaction=True)
def test_the_lean_join_keeps_the_return_url_too(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, target_url=TARGET)

    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    reply = call(
        HotPaths(refuse),
        "POST",
        f"/api/v1/events/{event.slug}/join",
        body=json.dumps({"return": DEEP}).encode(),
    )
    assert reply.status == 201
    ticket = reply.body["ticket"]
    assert entry_of(ticket).return_url == DEEP
    assert admitted_redirect(event, ticket).startswith(DEEP + "&wr_pass=")


@pytest.mark.django_db(transaction=True)
def test_both_join_paths_answer_alike_with_a_return_url(make_event) -> None:
    event = make_event(capacity=0, target_url=TARGET)
    path = f"/api/v1/events/{event.slug}/join"
    body = json.dumps({"return": DEEP}).encode()
    lean = call(
        HotPaths(django_asgi_app), "POST", path, body=body, headers={"idempotency-key": "a"}
    )
    plain = call(django_asgi_app, "POST", path, body=body, headers={"idempotency-key": "b"})
    assert lean.status == plain.status == 201
    assert {
        entry_of(lean.body["ticket"]).return_url,
        entry_of(plain.body["ticket"]).return_url,
    } == {DEEP}


@pytest.mark.django_db
def test_an_allowed_host_is_gone_back_to(make_event) -> None:
    event = make_event(
        capacity=1, rate_per_minute=0, target_url=TARGET, allowed_return_hosts=["m.shop.example"]
    )
    url = "https://m.shop.example/p/7"
    ticket = join(new_fan(), event.slug, {"return": url}).json()["ticket"]
    assert admitted_redirect(event, ticket).startswith(url + "?wr_pass=")


HOSTILE = [
    "https://evil.example/steal",
    "https://shop.example.evil.example/",
    "//evil.example/",
    "javascript:alert(document.cookie)",
    "JavaScript://shop.example/%0aalert(1)",
    "data:text/html,<script>alert(1)</script>",
    "https://shop.example@evil.example/",
    "https://shop.example:pw@evil.example/",
    "https://evil.example\\@shop.example/",
    "https://shop.example/\r\nLocation: https://evil.example/",
    "/relative/path",
    "https://evil.example/?next=https://shop.example/",
    "http://shop.example:8443/other-port",
]


@pytest.mark.django_db
@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_return_url_ends_at_the_target(make_event, hostile: str) -> None:
    event = make_event(capacity=1, rate_per_minute=0, target_url=TARGET)
    response = join(new_fan(), event.slug, {"return": hostile})
    assert response.status_code == 201  # never refused for a bad link
    redirect = admitted_redirect(event, response.json()["ticket"])
    assert redirect.startswith(TARGET + "?wr_pass="), redirect


@pytest.mark.django_db
@pytest.mark.parametrize("value", [42, None, ["https://shop.example/"], {"u": 1}, "x" * 5000])
def test_a_return_that_is_not_a_url_is_ignored_not_refused(make_event, value: Any) -> None:
    event = make_event(capacity=0, target_url=TARGET)
    response = join(new_fan(), event.slug, {"return": value})
    assert response.status_code == 201
    assert entry_of(response.json()["ticket"]).return_url == ""


@pytest.mark.django_db
def test_an_unreadable_body_is_still_refused(make_event) -> None:
    event = make_event()
    response = Client().post(
        f"/api/v1/events/{event.slug}/join", data="return=x", content_type="text/plain"
    )
    assert response.status_code == 400 and response.json()["error"] == "bad_request"


@pytest.mark.django_db
def test_a_repeated_join_keeps_the_latest_return_url(make_event) -> None:
    event = make_event(capacity=0, target_url=TARGET)
    fan = new_fan()
    ticket = join(fan, event.slug, {"return": DEEP}).json()["ticket"]
    later = "https://shop.example/events/43"
    again = join(fan, event.slug, {"return": later})
    assert (again.status_code, again.json()["ticket"]) == (200, ticket)
    assert entry_of(ticket).return_url == later
    # A join without one (or with a bad one) keeps what the entry has.
    join(fan, event.slug, {})
    join(fan, event.slug, {"return": "javascript:alert(1)"})
    assert entry_of(ticket).return_url == later


@pytest.mark.django_db(transaction=True)
def test_the_admitted_message_on_the_socket_goes_back_too(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, target_url=TARGET)
    ticket = join(new_fan(), event.slug, {"return": DEEP}).json()["ticket"]

    async def scenario() -> dict[str, Any]:
        ws = WebsocketCommunicator(
            application,
            f"/ws/events/{event.slug}/?ticket={ticket}",
            [(b"origin", b"http://testserver")],
        )
        await ws.connect()
        await ws.receive_json_from(timeout=5)  # the snapshot
        await database_sync_to_async(tick)(event)
        message = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return message

    message = asyncio.run(scenario())
    assert message["type"] == "admitted"
    assert message["redirect_url"].startswith(DEEP + "&wr_pass=")


# The waiting page.


@pytest.mark.django_db
def test_the_page_hands_its_return_url_to_the_join_and_redirects_there(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, target_url=TARGET)
    browser = Client()
    page = browser.get(f"/e/{event.slug}/", {"return": DEEP})
    assert page.status_code == 200
    assert f'name="return" value="{DEEP.replace("&", "&amp;")}"' in page.content.decode()
    joined = browser.post(f"/e/{event.slug}/", {"return": DEEP})
    assert joined.status_code == 302
    (entry,) = list(event.entries.all())
    assert entry.return_url == DEEP
    tick(event)
    admitted = browser.get(f"/e/{event.slug}/")
    assert admitted.status_code == 302
    assert admitted["Location"].startswith(DEEP + "&wr_pass=")


@pytest.mark.django_db
def test_the_pages_forms_may_end_on_the_shop(make_event) -> None:
    """A browser holds a form's whole redirect chain to the page's CSP form-action: a join
    admitted at once (safety net, passthrough, a fan already admitted) ends in a redirect to
    the shop, which form-action 'self' alone refused (the fan stayed on "One moment,
    please…"). The page allows exactly the on-sale's destinations, and no other host."""
    event = make_event(
        mode="safety_net",
        capacity=1,
        rate_per_minute=0,
        target_url=TARGET,
        allowed_return_hosts=["127.0.0.1:8443"],
    )
    browser = Client()
    for page in (
        browser.get(f"/e/{event.slug}/", {"return": DEEP}),  # the join form
        browser.post(f"/e/{event.slug}/", {"return": DEEP}),
    ):
        (form_action,) = [
            directive.strip()
            for directive in page["Content-Security-Policy"].split(";")
            if directive.strip().startswith("form-action ")
        ]
        assert form_action.split() == [
            "form-action",
            "'self'",
            "https://shop.example",
            "http://shop.example",
            "https://127.0.0.1:8443",
            "http://127.0.0.1:8443",
        ]
        assert "script-src 'self'" in page["Content-Security-Policy"]  # the rest as it was
    # The other pages keep the room's own policy.
    assert Client().get("/")["Content-Security-Policy"].endswith("form-action 'self'")


@pytest.mark.django_db
def test_the_page_drops_a_hostile_return_url(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, target_url=TARGET)
    browser = Client()
    page = browser.get(f"/e/{event.slug}/", {"return": "javascript:alert(1)"}).content.decode()
    assert 'name="return"' not in page
    quoted = 'https://shop.example/"><script>alert(1)</script>'
    page = browser.get(f"/e/{event.slug}/", {"return": quoted}).content.decode()
    assert "<script>alert(1)" not in page  # escaped in the form field
    browser.post(f"/e/{event.slug}/", {"return": "https://evil.example/"})
    tick(event)
    assert browser.get(f"/e/{event.slug}/")["Location"].startswith(TARGET + "?wr_pass=")


@pytest.mark.django_db
def test_joining_again_from_the_page_keeps_the_link(make_event) -> None:
    event = make_event(capacity=0, target_url=TARGET)
    browser = Client()
    browser.post(f"/e/{event.slug}/", {"return": DEEP})
    (first,) = list(event.entries.all())
    browser.delete(f"/api/v1/tickets/{poll_ticket(browser, event)}")
    browser.post(f"/e/{event.slug}/", {"rejoin": "1"})
    second = event.entries.exclude(pk=first.pk).get()
    assert second.return_url == DEEP


def poll_ticket(browser: Client, event: Event) -> str:
    page = browser.get(f"/e/{event.slug}/").content.decode()
    marker = '"ticket": "'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]
