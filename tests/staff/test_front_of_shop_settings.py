"""The settings for standing in front of a shop (mode, return hosts, re-entry, message): the
staff API takes and checks them, the public event API shows mode and message, and every
change is audited."""

from __future__ import annotations

import pytest
from django.test import Client

from queueing.models import AuditRecord
from tests.helpers import EDITOR, STAFF_API, staff_api_create, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return staff_client("ann", *EDITOR, api=True, token=True)


def test_a_new_on_sale_queues_with_no_return_hosts_no_reentry_no_message(staff) -> None:
    body = staff_api_create(staff).json()
    assert body["mode"] == "queue"
    assert body["allowed_return_hosts"] == []
    assert body["reentry_seconds"] == 0
    assert body["message"] is None


def test_staff_set_mode_hosts_reentry_and_message_and_each_change_is_audited(staff) -> None:
    staff_api_create(staff)
    response = staff.patch(
        f"{STAFF_API}tour/",
        {
            "mode": "safety_net",
            "allowed_return_hosts": ["WWW.Shop.example", "shop.example:8443", "www.shop.example"],
            "reentry_seconds": 300,
            "message": "  General sale at 10:00  ",
        },
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["mode"] == "safety_net"
    assert body["allowed_return_hosts"] == ["shop.example:8443", "www.shop.example"]
    assert body["reentry_seconds"] == 300
    assert body["message"] == "General sale at 10:00"
    changes = AuditRecord.objects.filter(action="event_changed").latest("seq").data["changes"]
    assert changes["mode"] == ["queue", "safety_net"]
    assert changes["reentry_seconds"] == [0, 300]
    public = Client().get("/api/v1/events/tour").json()
    assert (public["mode"], public["message"]) == ("safety_net", "General sale at 10:00")
    # null clears the message.
    cleared = staff.patch(f"{STAFF_API}tour/", {"message": None}, format="json").json()
    assert cleared["message"] is None
    assert Client().get("/api/v1/events/tour").json()["message"] is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("mode", "party"),
        ("allowed_return_hosts", ["https://shop.example/"]),
        ("allowed_return_hosts", ["*.shop.example"]),
        ("allowed_return_hosts", ["shop.example/path"]),
        ("allowed_return_hosts", "shop.example"),
        ("reentry_seconds", -1),
        ("reentry_seconds", 86_401),
        ("message", "x" * 501),
    ],
)
def test_bad_settings_are_refused_with_the_field_named(staff, field, value) -> None:
    staff_api_create(staff)
    response = staff.patch(f"{STAFF_API}tour/", {field: value}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert field in response.json()["fields"]
