"""``/api/v1/manage/events/{slug}/registration``: staff set and read an on-sale's registration
window (staff/registration_api.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from queueing.models import AuditAction, AuditRecord
from tests.helpers import STAFF_API, staff_client

pytestmark = pytest.mark.django_db


def window_body(**fields: object) -> dict:
    now = timezone.now()
    return {
        "opens_at": now.isoformat(),
        "closes_at": (now + timedelta(days=2)).isoformat(),
        "winners": 100,
        "waitlist": 20,
        "shop_key": "s" * 40,
        **fields,
    }


def test_staff_set_and_read_the_window_without_seeing_the_key(event) -> None:
    carl = staff_client("carl", "view_event", "change_event", api=True, token=True)
    url = f"{STAFF_API}{event.slug}/registration"
    assert carl.get(url).status_code == 404
    answer = carl.put(url, window_body(), format="json")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert (data["winners"], data["waitlist"], data["invitation_hours"]) == (100, 20, 48)
    assert data["shop_key_set"] and "s" * 40 not in answer.content.decode()
    assert data["registrations"] == 0
    # The key is kept when a change leaves it out.
    changed = carl.put(url, {**window_body(winners=5), "shop_key": None}, format="json")
    assert changed.json()["shop_key_set"] is False
    assert carl.get(url).json()["winners"] == 5
    assert AuditRecord.objects.filter(action=AuditAction.REGISTRATION_WINDOW_SET).count() == 2


def test_staff_without_the_right_to_change_cannot_set_it(event) -> None:
    viewer = staff_client("vera", "view_event", api=True, token=True)
    answer = viewer.put(f"{STAFF_API}{event.slug}/registration", window_body(), format="json")
    assert answer.status_code == 403


@pytest.mark.parametrize(
    "fields",
    [
        {"winners": -1},
        {"closes_at": "2020-01-01T00:00:00Z"},
        {"shop_key": "short"},
        {"opens_at": "yesterday"},
    ],
)
def test_a_bad_window_is_refused(event, fields) -> None:
    carl = staff_client("carl", "view_event", "change_event", api=True, token=True)
    answer = carl.put(f"{STAFF_API}{event.slug}/registration", window_body(**fields), format="json")
    assert answer.status_code == 400 and answer.json()["error"] == "validation_error"
