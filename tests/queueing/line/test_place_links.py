"""Carry a place to another device (issue 16, part 3): a one-time, short-lived link moves the
place; the first browser's page then says it moved; no second place is ever made."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from queueing.beat import event_tick
from queueing.line.place_links import place_link_claim, place_link_create
from queueing.models import PlaceLink, QueueEntry
from queueing.rules.place_links import LinkRefusal, PlaceLinkRefused
from tests.helpers import new_fan

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
    now = timezone.now()
    token = place_link_create(
        entry_id=entry.pk,
        purpose=PlaceLink.Purpose.EMAIL,
        now=now,
        expires_at=now + timedelta(minutes=5),
    )
    event_tick(event_id=entry.event_id, now=timezone.now())
    assert QueueEntry.objects.get().status == "admitted"
    phone = Client()
    phone.post(f"/e/shop/move/{token}")
    assert phone.get("/e/shop/")["Location"].startswith("https://shop.example/?wr_pass=")
    stays = laptop.get("/e/shop/")
    assert stays.status_code == 200 and b"moved to another device" in stays.content
    assert QueueEntry.objects.get().pass_issued_at is not None  # handed over once, to the phone


@pytest.mark.django_db(transaction=True)
def test_two_browsers_claiming_at_once_cannot_both_win(make_event) -> None:
    make_event(slug="race", capacity=0)
    fan = new_fan()
    on_the_page(fan, "race")
    entry = QueueEntry.objects.get()
    now = timezone.now()
    token = place_link_create(
        entry_id=entry.pk,
        purpose=PlaceLink.Purpose.DEVICE,
        now=now,
        expires_at=now + timedelta(minutes=5),
    )
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
