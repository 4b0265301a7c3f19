"""The staff preview of an on-sale's line (dashboard/preview.py, its page /preview)."""

from __future__ import annotations

import re

import pytest
from django.forms.models import model_to_dict
from django.test import Client

from queueing.models import AuditRecord
from tests.helpers import staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def planner() -> Client:
    return staff_client("planner", "view_event")


def figure(html: str, name: str) -> str:
    found = re.search(rf'id="fig-{name}">([^<]*)<', html)
    assert found, name
    return found.group(1)


def test_the_preview_runs_the_sales_own_settings_at_first(planner, make_event) -> None:
    make_event(slug="tour", capacity=0, rate_per_minute=6000, session_seconds=600)
    reply = planner.get("/dashboard/events/tour/preview")
    assert reply.status_code == 200
    html = reply.content.decode()
    # The example: 50,000 in 10 minutes, at 100 a second: nobody waits past the next tick,
    # and the line is empty when the last arrives.
    assert figure(html, "fans") == "50,000"
    assert figure(html, "first") in ("0 s", "1 s")
    assert figure(html, "last") in ("0 s", "1 s")
    assert figure(html, "empty").startswith("10 min")
    assert figure(html, "pace") == "6,000"
    assert 'name="rate_per_minute" value="6000"' in html
    assert 'name="shop_minutes" value="5.0"' in html  # half the session
    assert "<svg" in html and "Expected fans in line over time" in html


def test_a_line_longer_than_the_pace_shows_its_waits(planner, make_event) -> None:
    """600 a minute let in, 50,000 in 10 minutes: 44,000 are left at 10 minutes, and the
    last goes in at about 83 minutes (50,000 / 600), 73 minutes after arriving."""
    make_event(slug="busy", capacity=0, rate_per_minute=600)
    html = planner.get("/dashboard/events/busy/preview").content.decode()
    assert figure(html, "peak") == "44,000"
    assert figure(html, "last") == "1 h 13 min"
    assert figure(html, "empty") == "1 h 23 min"
    assert figure(html, "median").startswith("36 min")
    # The time axis in round steps: 0, 15 min, 30 min, ... 1 h 15 min.
    assert ">15 min</text>" in html and ">1 h 15 min</text>" in html


def test_staff_try_other_settings_and_nothing_is_saved(planner, make_event) -> None:
    event = make_event(slug="drop", capacity=100, rate_per_minute=600, session_seconds=600)
    before = model_to_dict(event)
    records = AuditRecord.objects.count()

    def last_wait(**query: str) -> str:
        reply = planner.get(
            "/dashboard/events/drop/preview",
            {"fans": "600", "over_minutes": "1", "shop_minutes": "1"} | query,
        )
        assert reply.status_code == 200
        return figure(reply.content.decode(), "last")

    # 600 at one a second: the last (arriving at one minute) goes in at the tick at 599 s.
    # Ten a second into a shop of 100 who take a minute each: the shop sets the pace, 100 a
    # minute.
    assert last_wait(rate_per_minute="60") == "8 min 59 s"
    assert last_wait(rate_per_minute="600").startswith("4 min")
    # Twice the places: twice the pace, and the first 200 go in as they come.
    assert last_wait(rate_per_minute="600", capacity="200").startswith("1 min")
    event.refresh_from_db()
    assert model_to_dict(event) == before
    assert AuditRecord.objects.count() == records


def test_the_form_keeps_what_staff_tried(planner, make_event) -> None:
    make_event(slug="kept", capacity=100)
    html = planner.get(
        "/dashboard/events/kept/preview", {"capacity": "250", "tail_per_minute": "30"}
    ).content.decode()
    assert 'name="capacity" value="250"' in html
    assert 'name="tail_per_minute" value="30' in html
    assert 'href="/dashboard/events/kept/preview" id="preview-reset"' in html


@pytest.mark.parametrize(
    "query",
    [
        {"capacity": "-1"},
        {"rate_per_minute": "lots"},
        {"fans": "99999999999"},
        {"fans": "1e308"},
        {"over_minutes": "0"},
        {"over_minutes": "100000"},
        {"fans": "0", "prequeue_fans": "0"},
        {"abandon_percent": "100"},
        {"shop_minutes": "nan"},
        {"shop_minutes": "inf"},
        {"session_seconds": "0"},
        {"tail_per_minute": "-5"},
        {"capacity": ""},
    ],
)
def test_bad_input_is_a_form_error_not_a_crash(planner, make_event, query) -> None:
    make_event(slug="oops")
    reply = planner.get("/dashboard/events/oops/preview", query)
    assert reply.status_code == 400
    html = reply.content.decode()
    assert 'role="alert"' in html and 'id="fig-last"' not in html


def test_the_worst_a_query_can_ask_is_still_a_page(planner, make_event) -> None:
    """The most fans, the slowest shop: the simulation stops at its horizon (a day)."""
    make_event(slug="huge")
    reply = planner.get(
        "/dashboard/events/huge/preview",
        {
            "capacity": "1",
            "rate_per_minute": "0",
            "session_seconds": "86400",
            "shop_minutes": "1440",
            "prequeue_fans": "10000000",
            "fans": "10000000",
            "over_minutes": "1440",
            "tail_per_minute": "1000000",
        },
    )
    assert reply.status_code == 200
    html = reply.content.decode()
    assert figure(html, "last") == "not within 24 h 00 min"
    assert figure(html, "empty") == "not within 24 h 00 min"


def test_who_may_see_it(make_event) -> None:
    make_event(slug="private")
    url = "/dashboard/events/private/preview"
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    fan = staff_client("fan", staff=False)
    assert fan.get(url).status_code == 302  # not staff: the admin's login
    assert staff_client("bare").get(url).status_code == 403
    assert staff_client("viewer", "view_event").get(url).status_code == 200
    assert staff_client("editor", "change_event").get(url).status_code == 200
    root = staff_client("root", superuser=True)
    assert root.get(url).status_code == 200
    assert root.get("/dashboard/events/missing/preview").status_code == 404
    assert root.post(url).status_code == 405


def test_the_event_page_and_the_admin_link_to_it(planner, make_event) -> None:
    event = make_event(slug="linked")
    page = planner.get("/dashboard/events/linked/").content.decode()
    assert 'href="/dashboard/events/linked/preview"' in page
    admin = staff_client("root", superuser=True)
    form = admin.get(f"/admin/events/event/{event.pk}/change/").content.decode()
    # A link, not a submit of the whole form: nothing of the form (its CSRF token, access
    # codes) ends up in an address; the script adds the three settings as they stand.
    assert 'id="line-preview-link"' in form
    assert 'href="/dashboard/events/linked/preview"' in form
    assert "staff/line_preview_admin.js" in form
    assert 'formaction="/dashboard/events/linked/preview"' not in form
    # What the script sends: the settings as typed; anything else in a query is ignored.
    sent = admin.get(
        "/dashboard/events/linked/preview",
        {"capacity": "7", "rate_per_minute": "0", "session_seconds": "60", "name": "x"},
    )
    assert sent.status_code == 200 and 'name="capacity" value="7"' in sent.content.decode()
    event.refresh_from_db()
    assert event.capacity != 7
