"""The Queue-it settings of an on-sale (docs/queueit.md) in the staff API and the admin: the
customer and event ids echoed, the secret key write-only (never in an answer, a form or the
trail, which says only that it changed), bad values refused with the field named, and the
pair unique per customer id."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from events.models import Event
from queueing.models import AuditRecord
from tests.helpers import EDITOR, STAFF_API, staff_api_create, staff_client
from tests.staff.admin_forms import change_form_data

pytestmark = pytest.mark.django_db

SECRET = "Shop-Secret_0123456789!"


@pytest.fixture
def staff():
    return staff_client("ann", *EDITOR, api=True, token=True)


def trail(slug: str) -> str:
    return json.dumps(
        list(AuditRecord.objects.filter(event__slug=slug).values_list("data", flat=True))
    )


def test_staff_set_the_three_and_the_key_is_never_shown(staff) -> None:
    created = staff_api_create(staff, queueit_customer_id="acme", queueit_secret_key=SECRET)
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["queueit_customer_id"] == "acme"
    assert body["queueit_event_id"] == ""
    assert body["queueit_event_id_effective"] == "tour"
    assert body["queueit_secret_key_set"] is True
    assert "queueit_secret_key" not in body
    assert Event.objects.get(slug="tour").queueit_secret_key == SECRET

    changed = staff.patch(
        f"{STAFF_API}tour/",
        {"queueit_event_id": "tour-2026", "queueit_secret_key": SECRET + "x"},
        format="json",
    ).json()
    assert changed["queueit_event_id_effective"] == "tour-2026"
    for answer in (created.text if hasattr(created, "text") else "", json.dumps(changed)):
        assert SECRET not in answer
    assert SECRET not in json.dumps(staff.get(f"{STAFF_API}tour/").json())
    assert SECRET not in json.dumps(staff.get(STAFF_API).json())

    # The trail: that it was set, then changed, then cleared; never the key.
    staff.patch(f"{STAFF_API}tour/", {"queueit_secret_key": None}, format="json")
    records = trail("tour")
    assert SECRET not in records
    changes = [
        r["changes"].get("queueit_secret_key")
        for r in AuditRecord.objects.filter(event__slug="tour", action="event_changed")
        .order_by("id")
        .values_list("data", flat=True)
    ]
    assert changes == ["changed", "cleared"]
    created_record = AuditRecord.objects.get(event__slug="tour", action="event_created").data
    assert created_record["queueit_secret_key"] == "set"
    assert staff.get(f"{STAFF_API}tour/").json()["queueit_secret_key_set"] is False


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queueit_customer_id", "acme corp"),
        ("queueit_customer_id", "a" * 65),
        ("queueit_event_id", "Sale-1"),  # upper case: the connector's cookie would never hold
        ("queueit_event_id", "sale_1"),  # "_" breaks the token's grammar
        ("queueit_event_id", "sale~1"),
        ("queueit_secret_key", "too-short"),
        ("queueit_secret_key", "has a space in it 0123"),
        # The key is taken as sent (not trimmed): a final newline is no part of a key.
        ("queueit_secret_key", "shop-secret-0123456789\n"),
    ],
)
def test_bad_values_are_refused_with_the_field_named(staff, field: str, value: str) -> None:
    staff_api_create(staff)
    response = staff.patch(f"{STAFF_API}tour/", {field: value}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "validation_error" and body["detail"]
    assert field in body["fields"]
    if field == "queueit_secret_key":
        assert value not in json.dumps(body)


def test_the_pair_names_one_on_sale(staff) -> None:
    staff_api_create(staff, queueit_customer_id="acme", queueit_event_id="big-sale")
    clash = staff_api_create(
        staff, slug="other", queueit_customer_id="acme", queueit_event_id="big-sale"
    )
    assert clash.status_code == 400
    assert "queueit_event_id" in clash.json()["fields"]
    # The slug is the default event id: it clashes too.
    clash = staff_api_create(staff, slug="big-sale", queueit_customer_id="acme")
    assert clash.status_code == 400
    assert "queueit_event_id" in clash.json()["fields"]
    # Another customer id may use the same event id.
    fine = staff_api_create(
        staff, slug="third", queueit_customer_id="other", queueit_event_id="big-sale"
    )
    assert fine.status_code == 201


def test_the_admin_says_set_or_not_and_takes_a_new_key(make_event) -> None:
    event = make_event(slug="tour", queueit_customer_id="acme", queueit_secret_key=SECRET)
    admin = staff_client("boss", superuser=True)
    url = f"/admin/events/event/{event.pk}/change/"
    page = admin.get(url).content.decode()
    assert SECRET not in page
    assert "Queue-it secret key" in page and ">set<" in page.replace("\n", "").replace(" ", "")

    # Saved untouched: the key stays.
    form = change_form_data(admin, url)
    assert admin.post(url, form).status_code == 302
    assert Event.objects.get(pk=event.pk).queueit_secret_key == SECRET

    # A bad new key is a form error; a good one replaces the key.
    form["queueit_new_secret_key"] = ["short"]
    refused = admin.post(url, form)
    assert refused.status_code == 200 and "16 to 128" in refused.content.decode()
    form["queueit_new_secret_key"] = ["another-secret-0123456789"]
    assert admin.post(url, form).status_code == 302
    assert Event.objects.get(pk=event.pk).queueit_secret_key == "another-secret-0123456789"
    assert "another-secret-0123456789" not in trail("tour")

    # Cleared: the surface is off.
    form["queueit_new_secret_key"] = [""]
    form["queueit_clear_secret_key"] = ["on"]
    assert admin.post(url, form).status_code == 302
    assert Event.objects.get(pk=event.pk).queueit_secret_key == ""
    assert "not set" in admin.get(url).content.decode()


def test_a_slug_with_an_underscore_needs_an_event_id_of_its_own(staff) -> None:
    refused = staff_api_create(staff, slug="big_sale", queueit_customer_id="acme")
    assert refused.status_code == 400
    assert "queueit_event_id" in refused.json()["fields"]
    fine = staff_api_create(
        staff, slug="big_sale", queueit_customer_id="acme", queueit_event_id="big-sale"
    )
    assert fine.status_code == 201


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queueit_customer_id", "acme\n"),
        ("queueit_event_id", "sale-1\n"),
        ("queueit_secret_key", "shop-secret-0123456789\n"),
    ],
)
def test_a_final_newline_is_refused_by_the_model(make_event, field: str, value: str) -> None:
    # The API and the admin trim ids, but every writer goes through the model's validators:
    # "$" in them would let a final newline through, and such an id matches no queue URL.
    event = make_event(slug="tour")
    setattr(event, field, value)
    with pytest.raises(ValidationError) as refused:
        event.full_clean()
    assert field in refused.value.message_dict
