"""The Queue-it surface in process (queueing/web/queueit.py; docs/queueit.md): a connector's
queue URL places the fan as a join does and hands an admitted fan back to the shop with a
queueittoken; error URLs re-issue or refuse; cancel URLs end the session. The real connector
in front of a real shop: tests/test_queueit_connector.py."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from django.test import Client

from events.models import Event
from queueing.models import AuditRecord, QueueEntry
from queueing.rules.queueit_token import RedirectType, token_read
from tests.helpers import fans_join, poll, shop_completes, tick
from tests.queueit import page_config, token_of

pytestmark = pytest.mark.django_db

SECRET = "shop-secret-0123456789"
TARGET = "https://shop.example/checkout"
DEEP = "https://shop.example/products/42?size=9"


@pytest.fixture
def queueit_event(make_event) -> Any:
    def make(**fields: Any) -> Any:
        fields.setdefault("slug", "sale-1")
        fields.setdefault("capacity", 1)
        fields.setdefault("rate_per_minute", 0)
        return make_event(
            target_url=TARGET,
            queueit_customer_id="acme",
            queueit_secret_key=SECRET,
            **fields,
        )

    return make


def queue_url(base: str = "/", **params: str) -> str:
    query = {"c": "acme", "e": "sale-1", "ver": "javascript-5.0.1", "cver": "undefined"}
    query.update({"man": "unspecified", "t": DEEP})
    query.update(params)
    return f"{base}?{urlencode(query)}"


def arrive(fan: Client, url: str) -> Any:
    """The queue URL, and the room's own redirect after the join (to the page that shows
    the place, at the same base)."""
    first = fan.get(url)
    if first.status_code == 302 and "queueittoken=" not in first["Location"]:
        assert first["Location"].startswith(urlsplit(url).path + "?"), first["Location"]
        return fan.get(first["Location"])
    return first


def test_a_fan_waits_then_goes_back_to_the_shop_with_a_token(queueit_event) -> None:
    event = queueit_event()
    (inside,) = fans_join(event.slug, 1)
    tick(event)
    fan = Client()
    page = arrive(fan, queue_url())
    assert page.status_code == 200
    config = page_config(page.content.decode())
    assert config["status"] == "waiting"
    # The page's script sends the admitted fan back through the room; without JavaScript the
    # page's refresh reloads that same URL.
    assert config["handoverUrl"] == "/?" + urlencode({"c": "acme", "e": "sale-1", "t": DEEP})
    assert '<meta http-equiv="refresh"' in page.content.decode()
    entry = QueueEntry.objects.get(event=event, public_id__isnull=False, status="waiting")
    assert entry.return_url == DEEP

    # A repeated GET by the same browser never makes a second place.
    again = fan.get(queue_url())
    assert again.status_code == 200
    assert page_config(again.content.decode())["ticket"] == config["ticket"]
    assert QueueEntry.objects.filter(event=event).count() == 2

    # The fan inside is done with the shop: the slot is this fan's.
    assert shop_completes(poll(inside)["pass"], event.integration_key).status_code == 204
    tick(event)
    before = time.time()
    handed = fan.get(config["handoverUrl"])
    assert handed.status_code == 302
    location = handed["Location"]
    assert location.startswith(DEEP + "&queueittoken=e_sale-1~q_")
    token = token_read(token_of(location), secret_key=SECRET)
    assert token is not None
    assert token.queue_id == entry.public_id
    assert token.redirect_type == RedirectType.QUEUE
    assert before + 170 <= token.expires_at <= time.time() + 181


def test_a_fan_let_straight_through_gets_a_safetynet_token(queueit_event) -> None:
    queueit_event(mode="safety_net", capacity=10)
    fan = Client()
    reply = arrive(fan, queue_url(base="/queueit/"))
    assert reply.status_code == 302
    token = token_read(token_of(reply["Location"]), secret_key=SECRET)
    assert token is not None
    assert token.redirect_type == RedirectType.SAFETY_NET


def test_a_return_url_on_a_foreign_host_ends_at_the_target(queueit_event) -> None:
    queueit_event(capacity=0, mode="passthrough")
    fan = Client()
    reply = arrive(fan, queue_url(t="https://evil.example/steal"))
    assert reply.status_code == 302
    assert reply["Location"].startswith(TARGET + "?queueittoken=")


@pytest.mark.parametrize(
    "params",
    [
        {"c": "ACME"},
        {"e": "Sale-1"},
        {"e": "other"},
        {"c": ""},
    ],
)
def test_an_unknown_pair_is_not_found(queueit_event, params: dict[str, str]) -> None:
    queueit_event()
    assert Client().get(queue_url(**params)).status_code == 404
    assert QueueEntry.objects.count() == 0


def test_an_on_sale_without_a_secret_key_has_no_surface(make_event) -> None:
    make_event(slug="sale-1", queueit_customer_id="acme")
    assert Client().get(queue_url()).status_code == 404


def test_error_urls_reissue_or_refuse(queueit_event) -> None:
    event = queueit_event(capacity=5)
    fan = Client()
    arrive(fan, queue_url())
    tick(event)
    # The connector found the token late: the admitted fan gets a fresh one at once.
    for code in ("timestamp", "ip", "connector/sessionstate"):
        again = fan.get(queue_url(base=f"/error/{code}/", queueittoken="e_x~h_y", ts="1"))
        assert again.status_code == 302, code
        assert token_read(token_of(again["Location"]), secret_key=SECRET) is not None
    # Hash or event id refused: the shop's key or id differs; no token, or the fan loops.
    for code in ("hash", "eventid", "qidlimit"):
        refused = fan.get(queue_url(base=f"/error/{code}/", queueittoken="e_x~h_y", ts="1"))
        assert refused.status_code == 403, code
        assert "Location" not in refused
        assert "The shop could not check your pass." in refused.content.decode()


def test_cancel_urls_complete_the_session(queueit_event) -> None:
    event = queueit_event(capacity=1)
    fan = Client()
    reply = arrive(fan, queue_url())
    tick(event)
    reply = fan.get(queue_url())
    assert reply.status_code == 302
    token = token_read(token_of(reply["Location"]), secret_key=SECRET)
    assert token is not None
    done = "https://shop.example/thanks"
    cancelled = fan.get(
        "/cancel/multiple/acme?" + urlencode({"wrl": f"sale-1~{token.queue_id}", "r": done})
    )
    assert cancelled.status_code == 302 and cancelled["Location"] == done
    entry = QueueEntry.objects.get(public_id=token.queue_id)
    assert entry.status == "completed"
    record = AuditRecord.objects.filter(ticket_id=token.queue_id, action="completed").get()
    assert record.actor == "queueit-cancel"
    # Idempotent; a foreign r ends at the target URL.
    foreign = fan.get(
        "/cancel/multiple/acme?"
        + urlencode({"wrl": f"sale-1~{token.queue_id}", "r": "https://evil.example/"})
    )
    assert foreign["Location"] == TARGET
    assert AuditRecord.objects.filter(ticket_id=token.queue_id, action="completed").count() == 1

    # A later visit queues anew: a new ticket, so a new q_.
    later = arrive(fan, queue_url())
    if later.status_code == 200:
        tick(event)
        later = fan.get(queue_url())
    assert later.status_code == 302
    new = token_read(token_of(later["Location"]), secret_key=SECRET)
    assert new is not None and new.queue_id != token.queue_id

    # The v3 shape, without a queue id: the place this browser holds.
    v3 = fan.get("/queueit/cancel/acme/sale-1/?" + urlencode({"c": "acme", "r": done}))
    assert v3.status_code == 302 and v3["Location"] == done
    assert QueueEntry.objects.get(public_id=new.queue_id).status == "completed"


def test_cancel_of_unknown_pairs_changes_nothing(queueit_event) -> None:
    queueit_event()
    assert (
        Client().get("/cancel/multiple/acme?wrl=nope~x&r=https://shop.example/").status_code == 404
    )
    assert Client().get("/cancel/other/sale-1/").status_code == 404


def test_the_shop_culture_picks_the_page_language(queueit_event) -> None:
    event = queueit_event()
    fans_join(event.slug, 1)
    tick(event)
    fan = Client()
    page = arrive(fan, queue_url(cid="de-DE"))
    assert page.status_code == 200
    assert page["Content-Language"] == "de"
    # The refusal of a token the shop could not check speaks it too.
    refused = fan.get(queue_url("/error/hash/", cid="de-DE", queueittoken="x", ts="1"))
    assert refused.status_code == 403
    assert refused["Content-Language"] == "de"


def test_the_integration_config_is_served_to_the_key_holder(queueit_event) -> None:
    event = queueit_event()
    Event.objects.filter(pk=event.pk).update(
        traffic_rules=[
            {"action": "bypass", "path": ["/health"]},
            {"action": "block", "ip": ["10.0.0.0/8"]},
        ]
    )
    for key in ("", "wrong-key-0123456789"):
        refused = Client().get("/status/integrationconfig/acme", headers={"api-key": key})
        assert refused.status_code == 401
        assert refused.json()["error"] == "unauthorized" and refused.json()["detail"]
    served = Client().get(
        "/queueit/status/integrationconfig/secure/acme", headers={"api-key": SECRET}
    )
    assert served.status_code == 200
    assert served["Cache-Control"] == "private, no-store"
    config = served.json()
    assert [(i["ActionType"], i["EventId"]) for i in config["Integrations"]] == [
        ("Ignore", "sale-1"),
        ("Queue", "sale-1"),
    ]
    assert config["Integrations"][0]["QueueDomain"] == "testserver/queueit"
    assert [n["Rule"] for n in config["NotExpressible"]] == [2]
    assert SECRET not in served.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        "/?c=acme%00&e=sale-1",
        "/?c=acme&e=sale-1%00",
        "/queueit/?c=acme%0A&e=sale-1",
        "/error/hash/?c=%00&e=sale-1",
        "/cancel/multiple/acme%00?wrl=sale-1~x",
        "/cancel/acme/sale-1%00/x",
        "/status/integrationconfig/acme%00",
        "/status/integrationconfig/secure/" + "a" * 100,
    ],
)
def test_ids_that_cannot_be_stored_name_no_on_sale(queueit_event, client, url: str) -> None:
    """NUL, a newline or an overlong id never reaches PostgreSQL (which refuses NUL: a 500);
    a query string with NUL is refused before any view (400)."""
    queueit_event()
    response = client.get(url, HTTP_API_KEY=SECRET)
    assert response.status_code in (400, 401, 404), (url, response.status_code)
