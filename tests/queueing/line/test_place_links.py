"""Carry a place to another device (issue 16, part 3): a one-time, short-lived link moves the
place; the first browser's page then says it moved; no second place is ever made."""

from __future__ import annotations

import json
import re
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils import timezone

from queueing.beat import event_tick
from queueing.line.index_sync import hot_index_rebuild
from queueing.line.place_links import place_link_claim, place_link_create
from queueing.models import PlaceLink, QueueEntry
from queueing.rules.place_links import LinkRefusal, PlaceLinkRefused
from tests.helpers import new_fan, place_link_for

pytestmark = pytest.mark.django_db


def on_the_page(client: Client, slug: str) -> str:
    client.post(f"/e/{slug}/")
    page = client.get(f"/e/{slug}/").content.decode()
    assert 'id="position"' in page
    return page


def new_link(client: Client, slug: str) -> str:
    reply = client.post(f"/e/{slug}/move")
    assert reply.status_code == 200
    html = reply.content.decode()
    assert "<svg" in html and 'id="place-link-qr"' in html
    return re.search(r'id="place-link-url"[^>]*>([^<]+)<', html).group(1)


def position(html: str) -> str:
    return re.search(r'id="position">([^<]+)<', html).group(1)


def test_a_link_moves_the_place_once_and_the_first_browser_says_so(make_event) -> None:
    make_event(slug="move", capacity=0)
    on_the_page(new_fan(), "move")  # someone ahead
    laptop = new_fan()
    before = on_the_page(laptop, "move")
    entry = QueueEntry.objects.order_by("-id").first()
    url = new_link(laptop, "move")
    path = url.split("testserver", 1)[1]

    phone = Client()
    confirm = phone.get(path)
    assert confirm.status_code == 200 and b'id="claim-place"' in confirm.content
    assert confirm["Referrer-Policy"] == "same-origin"
    assert PlaceLink.objects.get().used_at is None  # opening never spends a link
    claimed = phone.post(path)
    assert claimed.status_code == 302 and claimed["Location"] == "/e/move/"
    on_phone = phone.get("/e/move/").content.decode()
    assert position(on_phone) == position(before) == "2"

    moved_page = laptop.get("/e/move/").content.decode()
    assert "Your place moved to another device." in moved_page
    assert 'id="position"' not in moved_page
    # One place, as it was: same entry, same order key, nothing new.
    assert QueueEntry.objects.count() == 2
    again = QueueEntry.objects.get(pk=entry.pk)
    assert (again.order_key, again.status) == (entry.order_key, entry.status)
    assert again.holder_key and again.holder_key != entry.holder_key

    # Used: a third browser gets nothing.
    third = Client()
    assert third.get(path).status_code == 410
    assert third.post(path).status_code == 410
    assert b"used already" in third.post(path).content


def test_a_join_from_the_first_browser_does_not_take_the_place_back(make_event) -> None:
    make_event(slug="back", capacity=0)
    laptop = new_fan()
    on_the_page(laptop, "back")
    path = new_link(laptop, "back").split("testserver", 1)[1]
    Client().post(path)
    laptop.post("/e/back/")  # the same identity: the same ticket, still shown elsewhere
    assert "moved to another device" in laptop.get("/e/back/").content.decode()
    assert QueueEntry.objects.count() == 1


def test_expired_unknown_and_other_on_sale_links_are_refused(make_event) -> None:
    make_event(slug="one", capacity=0)
    make_event(slug="two", capacity=0)
    fan = new_fan()
    on_the_page(fan, "one")
    entry = QueueEntry.objects.get()
    now = timezone.now()
    old = place_link_create(
        entry_id=entry.pk,
        purpose=PlaceLink.Purpose.DEVICE,
        now=now - timedelta(minutes=20),
        expires_at=now - timedelta(minutes=10),
    )
    assert Client().get(f"/e/one/move/{old}").status_code == 410
    assert Client().post(f"/e/one/move/{old}").status_code == 410
    fresh = place_link_create(
        entry_id=entry.pk,
        purpose=PlaceLink.Purpose.DEVICE,
        now=now,
        expires_at=now + timedelta(minutes=5),
    )
    assert Client().get(f"/e/two/move/{fresh}").status_code == 404  # not this on-sale's
    assert Client().post(f"/e/one/move/{fresh[:-2]}xx").status_code == 404  # a guess
    assert PlaceLink.objects.filter(used_at__isnull=False).count() == 0


def test_a_link_to_a_place_no_longer_in_line_is_refused(make_event) -> None:
    make_event(slug="gone", capacity=0)
    fan = new_fan()
    on_the_page(fan, "gone")
    path = new_link(fan, "gone").split("testserver", 1)[1]
    ticket = fan.post("/api/v1/events/gone/join", {}, content_type="application/json").json()[
        "ticket"
    ]
    assert fan.delete(f"/api/v1/tickets/{ticket}").status_code == 204
    reply = Client().post(path)
    assert reply.status_code == 410 and b"no longer in line" in reply.content
    assert PlaceLink.objects.get().used_at is None


def test_only_the_browser_showing_the_place_can_make_a_link(make_event) -> None:
    make_event(slug="mine", capacity=0)
    laptop = new_fan()
    on_the_page(laptop, "mine")
    Client().post(new_link(laptop, "mine").split("testserver", 1)[1])
    # Moved away: the laptop can no longer hand the place on.
    assert laptop.post("/e/mine/move").status_code == 302
    # A stranger without the page's cookie neither.
    assert Client().post("/e/mine/move").status_code == 302
    assert PlaceLink.objects.count() == 1


def test_a_new_link_revokes_the_one_before(make_event) -> None:
    """Issue 28, item 8: one place, one live link."""
    make_event(slug="one-link", capacity=0)
    fan = new_fan()
    on_the_page(fan, "one-link")
    older = new_link(fan, "one-link").split("testserver", 1)[1]
    newer = new_link(fan, "one-link").split("testserver", 1)[1]
    refused = Client().get(older)
    assert refused.status_code == 410 and b"This link has expired." in refused.content
    assert Client().post(older).status_code == 410
    assert Client().get(newer).status_code == 200
    now = timezone.now()
    assert PlaceLink.objects.filter(used_at__isnull=True, expires_at__gt=now).count() == 1


def test_a_place_asks_for_a_few_links_at_most(make_event, settings) -> None:
    settings.WR_PLACE_LINKS_PER_PLACE = 5
    make_event(slug="many", capacity=0)
    fan = new_fan()
    on_the_page(fan, "many")
    for _ in range(5):
        new_link(fan, "many")
    refused = fan.post("/e/many/move")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= settings.WR_PLACE_LINK_SECONDS
    assert "Too many attempts from here." in refused.content.decode()
    assert PlaceLink.objects.count() == 5
    # Its place is still shown where it was.
    assert 'id="position"' in fan.get("/e/many/").content.decode()


def test_claiming_needs_the_pages_csrf_token(make_event) -> None:
    make_event(slug="csrf", capacity=0)
    fan = new_fan()
    on_the_page(fan, "csrf")
    path = new_link(fan, "csrf").split("testserver", 1)[1]
    strict = Client(enforce_csrf_checks=True)
    assert strict.post(path).status_code == 403
    assert PlaceLink.objects.get().used_at is None


def test_an_admitted_place_moves_with_its_pass_and_the_first_browser_gets_none(
    make_event,
) -> None:
    make_event(slug="shop", capacity=5, rate_per_minute=0, target_url="https://shop.example/")
    laptop = new_fan()
    laptop.post("/e/shop/")
    entry = QueueEntry.objects.get()
    token = place_link_for(entry, email=True)
    event_tick(event_id=entry.event_id, now=timezone.now())
    assert QueueEntry.objects.get().status == "admitted"
    phone = Client()
    phone.post(f"/e/shop/move/{token}")
    assert phone.get("/e/shop/")["Location"].startswith("https://shop.example/?wr_pass=")
    stays = laptop.get("/e/shop/")
    assert stays.status_code == 200 and b"moved to another device" in stays.content
    assert QueueEntry.objects.get().pass_issued_at is not None  # handed over once, to the phone


def page_ticket(client: Client, slug: str) -> str:
    """The ticket the waiting page hands its script (and with it the API and the socket)."""
    html = client.get(f"/e/{slug}/").content.decode()
    found = re.search(r'<script id="wr-config" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))["ticket"]


def api(client: Client, method: str, path: str):
    return getattr(client, method)(path, content_type="application/json")


def test_the_ticket_the_place_had_before_it_moved_gets_nothing(
    make_event, redis_client, django_capture_on_commit_callbacks
) -> None:
    """Issue 28, item 4: the first browser's ticket still answered with the pass."""
    event = make_event(slug="spent", capacity=5, rate_per_minute=0, target_url="https://s.example/")
    laptop = new_fan()
    on_the_page(laptop, "spent")
    old = page_ticket(laptop, "spent")
    assert api(laptop, "post", "/api/v1/events/spent/join").json()["ticket"] == old
    phone = Client()
    with django_capture_on_commit_callbacks(execute=True):  # the hot index is told after it
        phone.post(new_link(laptop, "spent").split("testserver", 1)[1])
    new = page_ticket(phone, "spent")
    assert new != old

    refused = api(Client(), "get", f"/api/v1/tickets/{old}")
    assert refused.status_code == 410
    assert refused.json() == {
        "error": "place_moved",
        "detail": "Your place moved to another device.",
    }
    assert api(Client(), "get", f"/api/v1/tickets/{new}").json()["position"] == 1
    # The old ticket ends nothing, and its identity's join hands nothing back.
    assert api(laptop, "delete", f"/api/v1/tickets/{old}").status_code == 410
    again = api(laptop, "post", "/api/v1/events/spent/join")
    assert (again.status_code, again.json()["error"]) == (410, "place_moved")
    assert QueueEntry.objects.get().status == "waiting"
    # Redis lost, the index rebuilt from PostgreSQL: still refused.
    for key in redis_client.scan_iter(match=f"{settings.WR_REDIS_PREFIX}:*"):
        redis_client.delete(key)
    assert api(Client(), "get", f"/api/v1/tickets/{old}").status_code == 410
    assert hot_index_rebuild(event_id=event.id)
    assert api(Client(), "get", f"/api/v1/tickets/{old}").status_code == 410
    assert api(Client(), "get", f"/api/v1/tickets/{new}").json()["position"] == 1

    event_tick(event_id=event.id, now=timezone.now())
    assert QueueEntry.objects.get().status == "admitted"
    admitted_old = api(Client(), "get", f"/api/v1/tickets/{old}")
    assert admitted_old.status_code == 410 and b"wr_pass" not in admitted_old.content
    assert b"wr_pass" not in laptop.get("/e/spent/").content
    assert laptop.post(f"/api/v1/tickets/{old}/reenter").status_code == 410
    shown = api(Client(), "get", f"/api/v1/tickets/{new}").json()
    assert shown["status"] == "admitted" and "wr_pass=" in shown["redirect_url"]
    assert phone.get("/e/spent/")["Location"] == shown["redirect_url"]


@pytest.mark.django_db(transaction=True)
def test_two_browsers_claiming_at_once_cannot_both_win(make_event) -> None:
    make_event(slug="race", capacity=0)
    fan = new_fan()
    on_the_page(fan, "race")
    entry = QueueEntry.objects.get()
    token = place_link_for(entry)
    outcomes: list[str] = []
    barrier = threading.Barrier(4)

    def claim() -> None:
        try:
            barrier.wait()
            place_link_claim(token=token, event_id=entry.event_id, now=timezone.now())
            outcomes.append("moved")
        except PlaceLinkRefused as refusal:
            outcomes.append(refusal.reason.value)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["moved", LinkRefusal.USED, LinkRefusal.USED, LinkRefusal.USED]
