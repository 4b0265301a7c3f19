"""The preview of a draw's outcome on the preview page (dashboard/draw_preview.py)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from queueing.models import AuditRecord
from tests.helpers import registration_window_open, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def planner() -> Client:
    return staff_client("planner", "view_event")


def figure(html: str, name: str) -> str:
    found = re.search(rf'id="fig-draw-{name}">([^<]*)<', html)
    assert found, name
    return found.group(1)


def test_the_draw_starts_from_the_windows_own_numbers(planner, event) -> None:
    registration_window_open(event, winners=1000, waitlist=500, invitation_hours=24)
    html = planner.get("/dashboard/events/onsale/preview").content.decode()
    assert 'name="draw-winners" value="1000"' in html
    assert 'name="draw-invitation_hours" value="24"' in html
    # The example: 20,000 expected, 80% confirm, 85% use their invitation.
    assert figure(html, "confirmed") == "16,000"
    assert figure(html, "places") == "1,000"
    assert figure(html, "waitlisted") == "500"
    assert figure(html, "lost") == "14,500"
    assert figure(html, "first") == "850"
    # 150 lapse, 22.5, 3.4, 0.5, then fewer than half a fan: four waitlist rounds.
    assert figure(html, "rounds") == "4"
    assert figure(html, "settled") == "5 d 0 h"
    assert 'id="draw-preview-rounds"' in html and "Waitlist 1" in html


def test_staff_try_a_draw_and_the_lines_settings_stay(planner, make_event) -> None:
    make_event(slug="tour", capacity=250)
    before = AuditRecord.objects.count()
    reply = planner.get(
        "/dashboard/events/tour/preview",
        {
            "capacity": "300",
            "draw-registrations": "1000",
            "draw-confirmed_percent": "100",
            "draw-winners": "100",
            "draw-waitlist": "10",
            "draw-use_percent": "50",
            "draw-invitation_hours": "48",
        },
    )
    assert reply.status_code == 200
    html = reply.content.decode()
    # 50 lapse; the 10 waitlisted are invited, 5 lapse again: the waitlist runs dry.
    assert figure(html, "used") == "55"
    assert figure(html, "unfilled") == "45"
    assert figure(html, "rounds") == "never: the waitlist runs dry"
    # Each form sends the other's values along.
    assert '<input type="hidden" name="capacity" value="300">' in html
    assert '<input type="hidden" name="draw-winners" value="100">' in html
    assert AuditRecord.objects.count() == before


def test_expected_fans_are_shown_to_a_tenth_so_the_figures_agree(planner, event) -> None:
    """4 places, half used: 2 and 2 lapse; the 2 invited from the waitlist, 1 and 1; the last
    waitlisted, half a fan each: 3.5 in, half a place left when the waitlist runs dry."""
    html = planner.get(
        "/dashboard/events/onsale/preview",
        {"draw-winners": "4", "draw-waitlist": "3", "draw-use_percent": "50"},
    ).content.decode()
    assert figure(html, "used") == "3.5" and figure(html, "unfilled") == "0.5"
    assert figure(html, "rounds") == "never: the waitlist runs dry"


def test_with_no_window_the_example_is_shown(planner, event) -> None:
    html = planner.get("/dashboard/events/onsale/preview").content.decode()
    assert figure(html, "places") == "1,000" and 'id="fig-last"' in html


@pytest.mark.parametrize(
    "query",
    [
        {"draw-registrations": "-1"},
        {"draw-registrations": "99999999999"},
        {"draw-confirmed_percent": "101"},
        {"draw-use_percent": "nan"},
        {"draw-winners": "lots"},
        {"draw-invitation_hours": "0"},
        {"draw-waitlist": ""},
    ],
)
def test_bad_draw_input_is_a_form_error_not_a_crash(planner, event, query) -> None:
    reply = planner.get("/dashboard/events/onsale/preview", query)
    assert reply.status_code == 400
    html = reply.content.decode()
    assert 'role="alert"' in html and 'id="fig-draw-places"' not in html
