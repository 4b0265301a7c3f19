"""The look through the staff API: accent colour and texts read and written (validated, audited),
the logo's URL read-only; bad input is a 400 validation_error naming the field."""

from __future__ import annotations

import pytest
from django.utils import timezone

from events.models import Event
from queueing.models import AuditRecord
from staff.services import event_logo_change
from tests.helpers import EDITOR, STAFF_API, staff_api_create, staff_client
from tests.images import TINY_PNG

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return staff_client("ann", *EDITOR, api=True, token=True)


def test_a_new_on_sale_has_the_rooms_own_look(staff) -> None:
    body = staff_api_create(staff).json()
    assert body["accent_color"] == "" and body["intro_text"] == ""
    assert body["next_steps_text"] == ""
    assert body["logo_url"] is None and body["accent_contrast_low"] is False


def test_staff_set_and_clear_the_look(staff) -> None:
    staff_api_create(staff, accent_color="#1D4ED8", intro_text="**Hi**")
    response = staff.patch(
        f"{STAFF_API}tour/",
        {"intro_text": "Presale *sold out*", "next_steps_text": "- pay in 10 minutes"},
        format="json",
    )
    body = response.json()
    assert response.status_code == 200, body
    assert body["accent_color"] == "#1d4ed8"  # kept lower-case
    assert (body["intro_text"], body["next_steps_text"]) == (
        "Presale *sold out*",
        "- pay in 10 minutes",
    )
    record = AuditRecord.objects.filter(action="event_changed").order_by("-seq").first()
    assert record.data["changes"]["intro_text"] == ["**Hi**", "Presale *sold out*"]
    cleared = staff.patch(
        f"{STAFF_API}tour/", {"accent_color": None, "intro_text": None}, format="json"
    ).json()
    assert cleared["accent_color"] == "" and cleared["intro_text"] == ""


def test_a_low_contrast_colour_is_accepted_and_flagged(staff) -> None:
    body = staff_api_create(staff, accent_color="#ffcc00").json()
    assert body["accent_color"] == "#ffcc00" and body["accent_contrast_low"] is True


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("accent_color", "red"),
        ("accent_color", "#12345"),
        ("accent_color", "#1d4ed8;}"),
        ("accent_color", "url(javascript:alert(1))"),
        ("accent_color", 7),
        ("intro_text", "x" * 2001),
        ("next_steps_text", "x" * 2001),
        ("intro_text", ["a"]),
    ],
)
def test_bad_look_values_are_refused_by_field(staff, field, value) -> None:
    staff_api_create(staff)
    response = staff.patch(f"{STAFF_API}tour/", {field: value}, format="json")
    body = response.json()
    assert response.status_code == 400, body
    assert body["error"] == "validation_error" and field in body["fields"]
    event = Event.objects.get(slug="tour")
    assert (event.accent_color, event.intro_text, event.next_steps_text) == ("", "", "")


def test_the_logo_url_is_read_only(staff) -> None:
    staff_api_create(staff)
    event = event_logo_change(
        event=Event.objects.get(slug="tour"), actor="t", now=timezone.now(), image=TINY_PNG
    )
    body = staff.get(f"{STAFF_API}tour/").json()
    assert body["logo_url"] == f"/e/tour/logo/{event.logo_sha256}"
    ignored = staff.patch(
        f"{STAFF_API}tour/", {"logo_url": "https://evil.example/x.png"}, format="json"
    )
    assert ignored.status_code == 200
    assert ignored.json()["logo_url"] == f"/e/tour/logo/{event.logo_sha256}"
