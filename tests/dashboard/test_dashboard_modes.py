"""The dashboard shows each on-sale's mode and lets staff with the right to steer change it:
a POST with its CSRF token, confirmed, through staff.services (audited)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from events.models import EventMode
from queueing.models import AuditRecord
from tests.helpers import staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    return staff_client("ann", "change_event")


def test_the_catalogue_and_the_on_sales_page_show_the_mode(staff, make_event) -> None:
    make_event(slug="calm")
    make_event(slug="busy", mode="safety_net")
    html = staff.get("/dashboard/", {"tab": "live"}).content.decode()
    assert '<th scope="col">Mode</th>' in html
    assert 'class="mode mode-safety_net" data-fig="mode">Safety net</span>' in html
    assert 'class="mode mode-queue" data-fig="mode">Queue</span>' in html
    figures = staff.get("/dashboard/catalogue/figures", {"tab": "live"}).json()
    assert figures["rows"]["busy"]["mode"] == "safety_net"
    page = staff.get("/dashboard/events/busy/").content.decode()
    assert 'id="fig-mode"' in page and ">Safety net</span>" in page
    assert '<option value="safety_net" selected>' in page
    assert staff.get("/dashboard/events/busy/stats").json()["mode"] == "safety_net"


def test_staff_change_the_mode_with_confirmation_and_it_is_audited(staff, make_event) -> None:
    event = make_event()
    url = f"/dashboard/events/{event.slug}/control"
    first = staff.post(url, {"action": "mode", "value": "maintenance"})
    assert first.status_code == 200 and b"Confirm" in first.content
    event.refresh_from_db()
    assert event.mode == EventMode.QUEUE
    done = staff.post(url, {"action": "mode", "value": "maintenance", "confirmed": "yes"})
    assert done.status_code == 302
    event.refresh_from_db()
    assert event.mode == EventMode.MAINTENANCE
    record = AuditRecord.objects.filter(event=event, action="event_changed").latest("seq")
    assert (record.actor, record.data) == (
        "staff:ann",
        {"changes": {"mode": ["queue", "maintenance"]}},
    )


def test_an_unknown_mode_changes_nothing(staff, make_event) -> None:
    event = make_event()
    url = f"/dashboard/events/{event.slug}/control"
    for value in ("", "party", "QUEUE", "maintenance "):
        reply = staff.post(url, {"action": "mode", "value": value, "confirmed": "yes"}, follow=True)
        assert b"Unknown mode." in reply.content
    event.refresh_from_db()
    assert event.mode == EventMode.QUEUE
    assert not AuditRecord.objects.filter(event=event, action="event_changed").exists()


def test_changing_the_mode_needs_the_right_to_steer(make_event) -> None:
    event = make_event()
    onlooker = staff_client("viv")
    onlooker.post(
        f"/dashboard/events/{event.slug}/control",
        {"action": "mode", "value": "passthrough", "confirmed": "yes"},
    )
    event.refresh_from_db()
    assert event.mode == EventMode.QUEUE


def test_changing_the_mode_needs_the_csrf_token(make_event) -> None:
    event = make_event()
    browser = staff_client("bea", "change_event", csrf_checks=True)
    url = f"/dashboard/events/{event.slug}/control"
    form = {"action": "mode", "value": "passthrough", "confirmed": "yes"}
    assert browser.post(url, form).status_code == 403
    event.refresh_from_db()
    assert event.mode == EventMode.QUEUE
    page = browser.get(f"/dashboard/events/{event.slug}/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert browser.post(url, {**form, "csrfmiddlewaretoken": token}).status_code == 302
    event.refresh_from_db()
    assert event.mode == EventMode.PASSTHROUGH
