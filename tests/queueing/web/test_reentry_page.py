"""The waiting page after a shop session that ended without completing: what happened, and
"Go back in line" while the on-sale allows it (queueing/web/pages.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from events.models import Event
from queueing.beat import event_tick
from queueing.line.expiry import sessions_expire
from queueing.line.sessions import pass_complete
from queueing.models import AuditRecord, QueueEntry
from queueing.rules.states import EntryStatus
from tests.helpers import fans_join

pytestmark = pytest.mark.django_db

BUTTON = "Go back in line"


def in_the_shop(make_event, **fields: object) -> tuple[Event, Client, QueueEntry]:
    """A fan who joined on the page, was let in and went to the shop; one fan waits behind."""
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600, **fields)
    browser = Client()
    assert browser.post(f"/e/{event.slug}/").status_code == 302
    fans_join(event.slug, 1)
    event_tick(event_id=event.id, now=timezone.now())
    to_shop = browser.get(f"/e/{event.slug}/")
    assert to_shop.status_code == 302 and "wr_pass=" in to_shop["Location"]
    entry = QueueEntry.objects.get(event=event, status=EntryStatus.ADMITTED)
    return event, browser, entry


def pass_runs_out(event: Event, entry: QueueEntry) -> None:
    QueueEntry.objects.filter(pk=entry.pk).update(
        pass_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert sessions_expire(event_id=event.id, now=timezone.now()) == 1


def test_an_expired_session_offers_the_way_back_while_the_window_is_open(make_event) -> None:
    event, browser, entry = in_the_shop(make_event, reentry_seconds=600)
    pass_runs_out(event, entry)
    page = browser.get(f"/e/{event.slug}/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Your time in the shop ran out before you finished." in text
    assert BUTTON in text and 'name="reenter"' in text
    assert "You can go back to the front of the line until" in text
    assert "Join the line again" not in text

    # The button: back in line, and the page is a waiting page again (live updates and all).
    back = browser.post(f"/e/{event.slug}/", {"reenter": "1"})
    assert back.status_code == 302 and back["Location"] == f"/e/{event.slug}/"
    waiting = browser.get(f"/e/{event.slug}/").content.decode()
    assert 'id="position">1<' in waiting
    assert 'id="wr-config"' in waiting and "queueing/waiting" in waiting
    assert AuditRecord.objects.filter(action="reentered", ticket_id=entry.public_id).exists()


def test_without_re_entry_the_page_says_what_happened_and_offers_a_new_place(make_event) -> None:
    event, browser, entry = in_the_shop(make_event)  # reentry_seconds 0: off
    pass_runs_out(event, entry)
    text = browser.get(f"/e/{event.slug}/").content.decode()
    assert "Your time in the shop ran out before you finished." in text
    assert BUTTON not in text and 'name="reenter"' not in text
    assert "Join the line again" in text


def test_a_session_the_shop_abandoned_offers_the_way_back_too(make_event) -> None:
    event, browser, entry = in_the_shop(make_event, reentry_seconds=600)
    token = browser.get(f"/api/v1/tickets/{ticket_of(browser, event, entry)}").json()["pass"]
    assert pass_complete(
        token=token,
        outcome="abandoned",
        integration_key=event.integration_key,
        now=timezone.now(),
    )
    text = browser.get(f"/e/{event.slug}/").content.decode()
    assert "Your visit to the shop ended before you finished." in text
    assert BUTTON in text


def test_a_window_closed_meanwhile_says_why_and_offers_a_new_place(make_event) -> None:
    event, browser, entry = in_the_shop(make_event, reentry_seconds=60)
    pass_runs_out(event, entry)
    assert BUTTON in browser.get(f"/e/{event.slug}/").content.decode()
    QueueEntry.objects.filter(pk=entry.pk).update(ended_at=timezone.now() - timedelta(minutes=5))
    refused = browser.post(f"/e/{event.slug}/", {"reenter": "1"})
    text = refused.content.decode()
    assert refused.status_code == 409
    assert "The time to go back in line has passed" in text
    assert BUTTON not in text and "Join the line again" in text
    assert QueueEntry.objects.get(pk=entry.pk).status == EntryStatus.EXPIRED


def test_the_page_speaks_german_too(make_event) -> None:
    event, browser, entry = in_the_shop(make_event, reentry_seconds=600)
    pass_runs_out(event, entry)
    text = browser.get(f"/e/{event.slug}/", headers={"Accept-Language": "de"}).content.decode()
    assert "Zurück in die Warteschlange" in text
    assert "wieder ganz vorne anstellen" in text
    assert BUTTON not in text


def ticket_of(browser: Client, event: Event, entry: QueueEntry) -> str:
    """The page's ticket, as the browser's cookie holds it."""
    raw = browser.cookies[f"wr_ticket_{event.pk}"].value
    return raw.split(":", 1)[0].split("|", 1)[0]
