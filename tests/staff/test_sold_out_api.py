"""``POST /api/v1/events/{slug}/sold-out`` (the shop, with the integration key) and
``POST /api/v1/manage/events/{slug}/sold-out`` (staff), and what fans see afterwards: the
public event API, joins by API and page, the waiting page on a fresh load."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from events.models import MESSAGE_MAX_LENGTH, Event
from queueing.models import AuditAction, AuditRecord
from staff.services import event_close
from tests.helpers import STAFF_API, fans_join, join, new_fan, staff_client

pytestmark = pytest.mark.django_db


def shop_says(slug: str, body: Any = None, *, key: str | None, raw: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    data = raw if raw is not None else ({} if body is None else body)
    return Client().post(
        f"/api/v1/events/{slug}/sold-out",
        data,
        content_type="application/json",
        headers=headers,
    )


def records(event: Event) -> int:
    return AuditRecord.objects.filter(event=event, action=AuditAction.EVENT_SOLD_OUT).count()


def test_the_shop_marks_it_sold_out_with_its_key_and_gets_the_public_event(make_event) -> None:
    event = make_event(slug="gig")
    reply = shop_says("gig", {"message": "Thanks, all gone."}, key=event.integration_key)
    assert reply.status_code == 200, reply.content
    body = reply.json()
    assert body["slug"] == "gig" and body["state"] == "closed"
    assert body["sold_out_at"] is not None
    assert body["sold_out_message"] == "Thanks, all gone."
    assert Client().get("/api/v1/events/gig").json()["sold_out_at"] == body["sold_out_at"]
    # Again (a retry): the same answer, no second record; an empty body is fine.
    again = shop_says("gig", key=event.integration_key)
    assert again.status_code == 200 and again.json()["sold_out_at"] == body["sold_out_at"]
    assert records(event) == 1
    assert AuditRecord.objects.get(event=event, action=AuditAction.EVENT_SOLD_OUT).actor == "shop"


def test_the_shop_needs_the_key_of_that_on_sale(make_event) -> None:
    event = make_event(slug="gig")
    other = make_event(slug="other")
    for key in (None, "", "wrong", other.integration_key):
        reply = shop_says("gig", key=key)
        assert reply.status_code == 401, key
        assert reply.json()["error"] == "unauthorized"
    basic = Client().post(
        "/api/v1/events/gig/sold-out",
        {},
        content_type="application/json",
        headers={"Authorization": f"Basic {event.integration_key}"},
    )
    assert basic.status_code == 401
    event.refresh_from_db()
    assert event.sold_out_at is None and records(event) == 0


def test_the_shop_is_told_404_400_405_and_409_in_the_contracts_words(make_event) -> None:
    event = make_event(slug="gig")
    key = event.integration_key
    assert shop_says("nope", key=key).json()["error"] == "event_not_found"
    assert shop_says("nope", key=key).status_code == 404
    for raw in ("not json", "[1]", '{"message": 5}', '{"message": "a\\u0000b"}'):
        reply = shop_says("gig", key=key, raw=raw)
        assert reply.status_code == 400, raw
        assert reply.json()["error"] == "bad_request"
    too_long = shop_says("gig", {"message": "x" * (MESSAGE_MAX_LENGTH + 1)}, key=key)
    assert too_long.status_code == 400
    got = Client().get("/api/v1/events/gig/sold-out", headers={"Authorization": f"Bearer {key}"})
    assert got.status_code == 405
    event.refresh_from_db()
    assert event.sold_out_at is None
    closed = make_event(slug="closed")
    event_close(event=closed, actor="test", now=timezone.now())
    refused = shop_says("closed", key=closed.integration_key)
    assert refused.status_code == 409 and refused.json()["error"] == "event_closed"


def test_staff_mark_it_sold_out_with_the_right_to_change_it(make_event) -> None:
    make_event(slug="gig")
    url = f"{STAFF_API}gig/sold-out"
    assert Client().post(url).status_code in (401, 403)
    viewer = staff_client("vic", "view_event", api=True)
    assert viewer.post(url, {}, format="json").status_code == 403
    editor = staff_client("ann", "view_event", "change_event", api=True)
    assert editor.post(f"{STAFF_API}nope/sold-out", {}, format="json").status_code == 404
    long = editor.post(url, {"message": "x" * (MESSAGE_MAX_LENGTH + 1)}, format="json")
    assert long.status_code == 400 and "message" in long.json()["fields"]
    reply = editor.post(url, {"message": "See you next tour"}, format="json")
    assert reply.status_code == 200, reply.content
    body = reply.json()
    assert body["state"] == "closed" and body["control"] == "closed"
    assert body["sold_out_at"] is not None and body["sold_out_message"] == "See you next tour"
    record = AuditRecord.objects.get(action=AuditAction.EVENT_SOLD_OUT)
    assert record.actor == "staff:ann" and record.data["by"] == "staff"
    assert editor.get(f"{STAFF_API}gig/").json()["sold_out_at"] == body["sold_out_at"]


def test_staff_cannot_mark_sold_out_what_was_closed(make_event) -> None:
    closed = make_event(slug="closed")
    event_close(event=closed, actor="test", now=timezone.now())
    editor = staff_client("ann", "view_event", "change_event", api=True)
    reply = editor.post(f"{STAFF_API}closed/sold-out", {}, format="json")
    assert reply.status_code == 409 and reply.json()["error"] == "event_closed"


def test_after_it_sold_out_joins_and_pages_say_sold_out(make_event, settings) -> None:
    settings.WR_LAYOUT_CACHE_SECONDS = 0  # polls read the on-sale as it is now
    event = make_event(slug="gig", capacity=0, rate_per_minute=1)
    fan = new_fan()
    assert fan.post("/e/gig/").status_code == 302  # joined from the page: its cookie
    fans_join("gig", 2)
    assert Client().get("/api/v1/events/gig").json()["sold_out_at"] is None
    shop_says("gig", {"message": "Every seat is taken."}, key=event.integration_key)

    refused = join(new_fan(), "gig")
    assert refused.status_code == 409
    assert refused.json() == {"error": "event_sold_out", "detail": "This on-sale is sold out."}
    # A newcomer's page says it at once, before any join.
    page = new_fan().get("/e/gig/", headers={"Accept-Language": "en"})
    assert page.status_code == 409
    html = page.content.decode()
    assert "Sold out" in html and "Every seat is taken." in html
    assert "Join the line" not in html
    # A fan in line, on a fresh load: "Sold out" and the word, not a place.
    waiting = fan.get("/e/gig/", headers={"Accept-Language": "en"})
    assert waiting.status_code == 200
    html = waiting.content.decode()
    assert 'id="status-text">Sold out<' in html and "Every seat is taken." in html
    assert 'id="position"' not in html and "waiting.js" not in html
