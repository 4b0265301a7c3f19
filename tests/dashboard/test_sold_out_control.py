"""Sold out on the dashboard: the on-sale's page offers the button (dashboard/controls.py),
its confirmation says what it does in that moment's numbers, it is done only once confirmed,
and the report (dashboard/sale_report.py) then says when it sold out and who said so."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from dashboard.sale_report import sale_report
from events.models import Event
from queueing.models import AuditAction, AuditRecord
from staff.sell_out import event_sell_out
from tests.helpers import fans_join, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Client:
    return staff_client("ann", "view_event", "change_event")


def control(client: Client, event: Event, **form: str) -> Any:
    return client.post(f"/dashboard/events/{event.slug}/control", form)


def words(html: str, section: str) -> str:
    found = re.search(rf'<section class="{section}".*?</section>', html, re.S)
    assert found is not None, section
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(0)).split())


def test_the_button_asks_first_then_sells_out_with_the_word(staff, make_event) -> None:
    event = make_event(slug="gig", capacity=0, rate_per_minute=1)
    fans_join(event.slug, 4)
    page = staff.get("/dashboard/events/gig/").content.decode()
    assert 'value="sold_out"' in page and 'id="sold-out"' in page
    asked = control(staff, event, action="sold_out", message="  See you next time  ")
    said = words(asked.content.decode(), "confirm")
    assert "Mark On-sale gig sold out?" in said
    assert "says “Sold out” at once, with: “See you next time”" in said
    assert "The 4 fans still in line are sent home" in said
    assert "Yes, mark sold out" in said
    event.refresh_from_db()
    assert event.sold_out_at is None  # asked, not done
    done = control(staff, event, action="sold_out", message="See you next time", confirmed="yes")
    assert done.status_code == 302
    event.refresh_from_db()
    assert event.sold_out_at is not None and event.sold_out_message == "See you next time"
    assert AuditRecord.objects.get(action=AuditAction.EVENT_SOLD_OUT).actor == "staff:ann"
    after = staff.get("/dashboard/events/gig/").content.decode()
    assert "sold out; every waiting page says so" in after
    assert 'id="no-controls"' in after and "(sold out, " in after


def test_a_long_word_is_refused_and_view_only_staff_cannot(staff, make_event) -> None:
    event = make_event(slug="gig")
    control(staff, event, action="sold_out", message="x" * 501, confirmed="yes")
    viewer = staff_client("vic", "view_event")
    control(viewer, event, action="sold_out", confirmed="yes")
    event.refresh_from_db()
    assert event.sold_out_at is None
    assert "at most 500 fit" in staff.get("/dashboard/events/gig/").content.decode()


def test_the_report_says_when_it_sold_out_and_who_said_so(staff, make_event) -> None:
    by_shop = make_event(slug="shop")
    fans_join("shop", 2)
    event_sell_out(event=by_shop, message="Thanks!", actor="shop", now=timezone.now())
    by_shop.refresh_from_db()
    told = sale_report(by_shop, now=timezone.now()).sold_out
    assert told is not None
    assert (told.at, told.by, told.message) == (by_shop.sold_out_at, "the shop", "Thanks!")
    html = staff.get("/dashboard/events/shop/report").content.decode()
    line = re.search(r'<p class="notice" id="report-sold-out">(.*?)</p>', html, re.S).group(1)
    assert "said by the shop" in line and "The fans read: “Thanks!”" in line
    csv_text = staff.get("/dashboard/events/shop/report.csv").content.decode()
    assert f"about,,,,sold_out_at,{by_shop.sold_out_at.isoformat()}" in csv_text
    assert "about,,,,sold_out_by,the shop" in csv_text

    by_staff = make_event(slug="staff")
    event_sell_out(event=by_staff, message="", actor="staff:ann", now=timezone.now())
    html = staff.get("/dashboard/events/staff/report").content.decode()
    assert "said by staff (ann)" in html and "The fans read" not in html

    make_event(slug="plain")
    assert (
        'id="report-sold-out"' not in staff.get("/dashboard/events/plain/report").content.decode()
    )
