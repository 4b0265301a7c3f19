"""The staff preview of an on-sale's line (dashboard/preview.py, its page /preview)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client() -> Client:
    user = User.objects.create_user("planner", password="pw-planner-1", is_staff=True)
    client = Client()
    client.force_login(user)
    return client


def figure(html: str, name: str) -> str:
    found = re.search(rf'id="fig-{name}">([^<]*)<', html)
    assert found, name
    return found.group(1)


def test_the_preview_runs_the_sales_own_settings_at_first(staff_client, make_event) -> None:
    event = make_event(slug="tour", capacity=0, rate_per_minute=6000, session_seconds=600)
    html = staff_client.get("/dashboard/events/tour/preview").content.decode()
    # 50,000 in 10 minutes at 100 a second: nobody waits long, the line is empty at 10 min.
    assert figure(html, "fans") == "50,000"
    assert figure(html, "first") in ("0 s", "1 s")  # the next tick
    assert figure(html, "empty").startswith("10 min")
    assert 'name="rate_per_minute" value="6000"' in html
    assert "<svg" in html and "Expected fans in line over time" in html
    event.refresh_from_db()
    assert event.rate_per_minute == 6000


def test_staff_try_other_settings_and_nothing_is_saved(staff_client, make_event) -> None:
    event = make_event(slug="drop", capacity=100, rate_per_minute=600, session_seconds=600)
    slow = staff_client.get(
        "/dashboard/events/drop/preview",
        {
            "rate_per_minute": "60",
            "capacity": "100",
            "fans": "600",
            "over_minutes": "1",
            "shop_minutes": "1",
        },
    ).content.decode()
    fast = staff_client.get(
        "/dashboard/events/drop/preview",
        {
            "rate_per_minute": "600",
            "capacity": "100",
            "fans": "600",
            "over_minutes": "1",
            "shop_minutes": "1",
        },
    ).content.decode()
    # 600 at one a second: the last waits about 9 minutes; ten a second and a shop of 100
    # that takes a minute each: the shop's pace (100 a minute) sets it, about 5 minutes.
    assert figure(slow, "last").startswith("9 min")
    assert figure(fast, "last").startswith("4 min") or figure(fast, "last").startswith("5 min")
    event.refresh_from_db()
    assert (event.capacity, event.rate_per_minute) == (100, 600)


@pytest.mark.parametrize(
    "query",
    [
        {"capacity": "-1"},
        {"rate_per_minute": "lots"},
        {"fans": "99999999999"},
        {"over_minutes": "0"},
        {"fans": "0", "prequeue_fans": "0"},
        {"abandon_percent": "100"},
        {"shop_minutes": "nan"},
    ],
)
def test_bad_input_is_a_form_error_not_a_crash(staff_client, make_event, query) -> None:
    make_event(slug="oops")
    reply = staff_client.get("/dashboard/events/oops/preview", query)
    assert reply.status_code == 400
    html = reply.content.decode()
    assert 'role="alert"' in html and 'id="fig-last"' not in html


def test_only_staff_see_it(make_event) -> None:
    make_event(slug="private")
    anonymous = Client().get("/dashboard/events/private/preview")
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    fan = User.objects.create_user("fan", password="pw-fan-12345")
    client = Client()
    client.force_login(fan)
    assert client.get("/dashboard/events/private/preview").status_code == 302
    staff = User.objects.create_user("s", password="pw-s-123456", is_staff=True)
    client.force_login(staff)
    assert client.get("/dashboard/events/missing/preview").status_code == 404


def test_the_event_page_and_the_admin_link_to_it(staff_client, make_event) -> None:
    event = make_event(slug="linked")
    page = staff_client.get("/dashboard/events/linked/").content.decode()
    assert 'href="/dashboard/events/linked/preview"' in page
    admin = User.objects.create_superuser("root", password="pw-root-12345")
    client = Client()
    client.force_login(admin)
    form = client.get(f"/admin/events/event/{event.pk}/change/").content.decode()
    assert 'formaction="/dashboard/events/linked/preview"' in form
    # The admin's button sends the form's own fields: only the settings count.
    sent = client.get(
        "/dashboard/events/linked/preview",
        {
            "capacity": "7",
            "rate_per_minute": "0",
            "session_seconds": "60",
            "name": "x",
            "csrfmiddlewaretoken": "y",
            "slug": "linked",
        },
    )
    assert sent.status_code == 200 and 'name="capacity" value="7"' in sent.content.decode()
