"""The admin's "Mark sold out" (staff/admin_sold_out.py): it asks first, with the fans each
on-sale sends home and a field for their word, and only then marks each sold out (audited)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from events.models import Event
from queueing.models import AuditAction, AuditRecord
from staff.services import event_close
from tests.helpers import fans_join, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_() -> Client:
    return staff_client("boss", superuser=True)


def test_it_asks_first_then_marks_each_sold_out_with_the_word(admin_client_, make_event) -> None:
    busy = make_event(slug="busy", capacity=0, rate_per_minute=1)
    quiet = make_event(slug="quiet")
    gone = make_event(slug="gone")
    event_close(event=gone, actor="test", now=timezone.now())
    fans_join(busy.slug, 3)
    selected = {"action": "sell_out_events", "_selected_action": [busy.pk, quiet.pk, gone.pk]}
    asked = admin_client_.post("/admin/events/event/", selected)
    assert asked.status_code == 200
    html = asked.content.decode()
    summary = re.search(r'<p id="sold-out-summary">(.*?)</p>', html, re.S).group(1)
    assert "closes these 2 on-sales at once" in summary
    assert "the <strong>3</strong> fans still in line are sent home" in summary
    assert "On-sale busy (<code>busy</code>): 3 in line sent home, 0 in the shop" in html
    assert "On-sale gone (<code>gone</code>): closed before it sold out" in html
    assert 'name="sold_out_message"' in html and "Yes, mark sold out" in html
    assert not Event.objects.filter(sold_out_at__isnull=False).exists()  # nothing done yet

    too_long = admin_client_.post(
        "/admin/events/event/", {**selected, "post": "yes", "sold_out_message": "x" * 501}
    )
    assert "longer than 500 characters: nothing was changed" in too_long.content.decode()
    assert not Event.objects.filter(sold_out_at__isnull=False).exists()

    done = admin_client_.post(
        "/admin/events/event/",
        {**selected, "post": "yes", "sold_out_message": "  Thank you all!  "},
        follow=True,
    )
    page = done.content.decode()
    assert "Marked 2 on-sale(s) sold out." in page
    assert "On-sale gone: This on-sale was closed before it sold out" in page
    sold = Event.objects.filter(sold_out_at__isnull=False)
    assert set(sold.values_list("slug", "sold_out_message")) == {
        ("busy", "Thank you all!"),
        ("quiet", "Thank you all!"),
    }
    actors = AuditRecord.objects.filter(action=AuditAction.EVENT_SOLD_OUT).values_list(
        "actor", flat=True
    )
    assert list(actors) == ["staff:boss", "staff:boss"]
    # The on-sale's page shows when and with which word, read-only.
    change = admin_client_.get(f"/admin/events/event/{busy.pk}/change/").content.decode()
    assert "Sold out at" in change and "Thank you all!" in change
    assert 'name="sold_out_message"' not in change


def test_view_only_staff_are_not_offered_it(make_event) -> None:
    event = make_event(slug="gig")
    viewer = staff_client("vic", "view_event")
    listing = viewer.get("/admin/events/event/").content.decode()
    assert "sell_out_events" not in listing
    viewer.post(
        "/admin/events/event/",
        {"action": "sell_out_events", "_selected_action": [event.pk], "post": "yes"},
    )
    event.refresh_from_db()
    assert event.sold_out_at is None
