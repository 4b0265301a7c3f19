"""'It's your turn' by e-mail (issue 16, part 2): an address left on the page, one mail through
Django's e-mail API to a local SMTP server when the fan is let in, with a link that moves the
place to the device that opens it; the address erased once sent and when the ticket ends."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from queueing.beat import event_tick
from queueing.line.turn_mail import turn_mail_send
from queueing.models import QueueEntry
from tests.helpers import new_fan
from tests.http import request
from tests.mailbox import smtp_server
from tests.processes import running_stack, wait_until

pytestmark = pytest.mark.django_db


def in_line(slug: str, **headers: str) -> Client:
    fan = new_fan()
    fan.post(f"/e/{slug}/", **headers)
    assert b'id="turn-mail-address"' in fan.get(f"/e/{slug}/", **headers).content
    return fan


def test_an_address_is_kept_checked_and_can_be_taken_back(make_event) -> None:
    make_event(slug="keep", capacity=0)
    fan = in_line("keep", HTTP_ACCEPT_LANGUAGE="fr")
    bad = fan.post("/e/keep/mail", {"email": "not an address"})
    assert bad["Location"] == "/e/keep/?mail=invalid#turn-mail"
    assert b'id="turn-mail-error"' in fan.get(bad["Location"]).content
    assert QueueEntry.objects.get().notify_email == ""
    fan.post("/e/keep/mail", {"email": "fan@example.com"}, HTTP_ACCEPT_LANGUAGE="fr")
    entry = QueueEntry.objects.get()
    assert (entry.notify_email, entry.notify_language) == ("fan@example.com", "fr")
    assert b"fan@example.com" in fan.get("/e/keep/").content
    fan.post("/e/keep/mail", {"clear": "1"})
    assert QueueEntry.objects.get().notify_email == ""
    # A browser that does not show the place cannot leave an address for it.
    Client().post("/e/keep/mail", {"email": "stranger@example.com"})
    assert QueueEntry.objects.get().notify_email == ""


def leaves(fan: Client, slug: str, address: str) -> str:
    """The page's form: where it sends the browser back to."""
    return fan.post(f"/e/{slug}/mail", {"email": address})["Location"]


@pytest.mark.parametrize(
    "address", ["x@[127.0.0.1]", "x@[IPv6:::1]", "x@localhost", "x@intranet", "x@localhost."]
)
def test_domain_literals_and_names_without_a_dot_are_refused(make_event, address) -> None:
    make_event(slug="lit", capacity=0)
    fan = in_line("lit")
    back = leaves(fan, "lit", address)
    assert back == "/e/lit/?mail=invalid#turn-mail"
    page = fan.get(back).content.decode()
    assert 'id="turn-mail-error"' in page and "does not look like an e-mail address" in page
    assert QueueEntry.objects.get().notify_email == ""


def test_an_address_is_kept_for_one_place_of_an_on_sale_only(make_event, mailbox) -> None:
    """Issue 28, item 2: six browsers leaving one victim's address made six mails."""
    event = make_event(slug="once", capacity=10, rate_per_minute=0)
    first, *others = [in_line("once") for _ in range(3)]
    assert leaves(first, "once", "victim@example.com") == "/e/once/#turn-mail"
    for other in others:
        back = leaves(other, "once", "Victim@Example.COM")  # the same mailbox
        assert back == "/e/once/?mail=taken#turn-mail"
        page = other.get(back).content.decode()
        assert "This address is already signed up for this on-sale." in page
    assert list(QueueEntry.objects.exclude(notify_email="").values_list("notify_email")) == [
        ("victim@example.com",)
    ]
    # The first place asking again, or taking another address and back, keeps it.
    assert leaves(first, "once", "victim@example.com") == "/e/once/#turn-mail"
    event_tick(event_id=event.id, now=timezone.now())
    ids = list(QueueEntry.objects.values_list("id", flat=True))
    assert turn_mail_send(entry_ids=ids, now=timezone.now()) == 1
    assert [m["X-Envelope-To"] for m in mailbox.messages] == ["victim@example.com"]


def test_a_place_that_lets_go_of_an_address_frees_it_and_a_mailed_one_stays_taken(
    make_event, mailbox, settings
) -> None:
    settings.WR_TURN_MAIL_PER_ADDRESS = 0  # one client address here: its cap is not the point
    make_event(slug="free", capacity=0, rate_per_minute=0)
    squatter, owner, third = in_line("free"), in_line("free"), in_line("free")
    leaves(squatter, "free", "owner@example.com")
    assert leaves(owner, "free", "owner@example.com").endswith("?mail=taken#turn-mail")
    squatter.post("/e/free/mail", {"clear": "1"})  # taken back: free again
    assert leaves(owner, "free", "owner@example.com") == "/e/free/#turn-mail"
    # A place that ended with the address no longer holds it either.
    leaves(third, "free", "third@example.com")
    ticket = third.post("/api/v1/events/free/join", {}, content_type="application/json").json()
    third.delete(f"/api/v1/tickets/{ticket['ticket']}")
    assert leaves(squatter, "free", "third@example.com") == "/e/free/#turn-mail"
    # Mailed: nobody else gets that address mailed again by this on-sale.
    owner_entry = QueueEntry.objects.get(notify_email="owner@example.com")
    QueueEntry.objects.filter(pk=owner_entry.pk).update(
        status="admitted", admitted_at=timezone.now()
    )
    assert turn_mail_send(entry_ids=[owner_entry.pk], now=timezone.now()) == 1
    squatter.post("/e/free/mail", {"clear": "1"})
    assert leaves(squatter, "free", "owner@example.com").endswith("?mail=taken#turn-mail")


def test_one_client_address_leaves_a_few_addresses_per_on_sale(make_event, settings) -> None:
    settings.WR_TURN_MAIL_PER_ADDRESS = 3
    make_event(slug="cap", capacity=0)
    fans = [in_line("cap") for _ in range(4)]
    for n, fan in enumerate(fans[:3]):
        assert leaves(fan, "cap", f"fan{n}@example.com") == "/e/cap/#turn-mail"
    back = leaves(fans[3], "cap", "fan3@example.com")
    assert back == "/e/cap/?mail=limited#turn-mail"
    assert "Too many attempts from here." in fans[3].get(back).content.decode()
    assert QueueEntry.objects.exclude(notify_email="").count() == 3
    # Another network's fans are not held back by it.
    elsewhere = Client(REMOTE_ADDR="192.0.2.7")
    elsewhere.post("/e/cap/")
    assert leaves(elsewhere, "cap", "fan3@example.com") == "/e/cap/#turn-mail"


def test_one_mail_when_let_in_with_a_link_that_moves_the_place(make_event, mailbox) -> None:
    event = make_event(
        slug="mail", capacity=1, rate_per_minute=0, target_url="https://shop.example/"
    )
    fan = in_line("mail", HTTP_ACCEPT_LANGUAGE="de")
    fan.post("/e/mail/mail", {"email": "fan@example.com"}, HTTP_ACCEPT_LANGUAGE="de")
    event_tick(event_id=event.id, now=timezone.now())
    entry = QueueEntry.objects.get()
    assert entry.status == "admitted"
    assert turn_mail_send(entry_ids=[entry.pk], now=timezone.now()) == 1
    assert turn_mail_send(entry_ids=[entry.pk], now=timezone.now()) == 0  # once only
    (message,) = mailbox.messages
    assert message["X-Envelope-To"] == "fan@example.com"
    assert message["Subject"] == "Sie sind dran: On-sale mail"  # the page's language
    body = message.get_content()
    link = next(line for line in body.splitlines() if "/e/mail/move/" in line).strip()
    entry.refresh_from_db()
    assert entry.notify_email == "" and entry.notified_at is not None
    # The link, opened on the phone, moves the place there and on to the shop.
    phone = Client()
    path = link.split("8000", 1)[1]
    assert phone.get(path).status_code == 200
    phone.post(path)
    assert phone.get("/e/mail/")["Location"].startswith("https://shop.example/?wr_pass=")
    assert phone.post(path).status_code == 410  # once


def test_the_address_goes_with_the_ticket(make_event) -> None:
    make_event(slug="end", capacity=0)
    fan = in_line("end")
    fan.post("/e/end/mail", {"email": "fan@example.com"})
    ticket = fan.post("/api/v1/events/end/join", {}, content_type="application/json").json()[
        "ticket"
    ]
    fan.delete(f"/api/v1/tickets/{ticket}")
    entry = QueueEntry.objects.get()
    assert entry.status == "left" and entry.notify_email == ""


def test_nobody_who_left_no_address_is_mailed(make_event, mailbox) -> None:
    event = make_event(slug="quiet", capacity=1, rate_per_minute=0)
    in_line("quiet")
    event_tick(event_id=event.id, now=timezone.now())
    assert turn_mail_send(entry_ids=[QueueEntry.objects.get().pk], now=timezone.now()) == 0
    assert mailbox.messages == []


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_the_worker_mails_a_fan_it_lets_in(make_event) -> None:
    with smtp_server() as (box, port):
        with running_stack(EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(port)) as stack:
            base = stack.web()
            event = make_event(slug="real", capacity=1, rate_per_minute=0, heartbeat_seconds=600)
            first = request("POST", f"{base}/api/v1/events/real/join", {}).body["ticket"]
            second = request("POST", f"{base}/api/v1/events/real/join", {}).body["ticket"]
            entry = QueueEntry.objects.order_by("-id").first()
            QueueEntry.objects.filter(pk=entry.pk).update(notify_email="fan@example.com")
            stack.worker()
            stack.beat()
            wait_until(
                lambda: (
                    request("GET", f"{base}/api/v1/tickets/{first}").body["status"] == "admitted"
                ),
                timeout=20,
                what="the first fan to be let in",
            )
            fan_pass = request("GET", f"{base}/api/v1/tickets/{first}").body["pass"]
            request(
                "POST",
                f"{base}/api/v1/passes/complete",
                {"pass": fan_pass, "outcome": "completed"},
                {"Authorization": f"Bearer {event.integration_key}"},
            )
            wait_until(lambda: len(box.messages) == 1, timeout=20, what="the turn mail")
            assert request("GET", f"{base}/api/v1/tickets/{second}").body["status"] == "admitted"
            assert box.messages[0]["X-Envelope-To"] == "fan@example.com"
            assert "/e/real/move/" in box.messages[0].get_content()
            entry.refresh_from_db()
            assert entry.notify_email == "" and entry.notified_at is not None
