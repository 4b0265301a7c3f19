"""A draw in the admin (staff/admin_registrations.py): the window on the on-sale's change form,
the registrations read-only and paged, without addresses."""

from __future__ import annotations

import pytest
from django.test import Client

from queueing.models import Registration
from tests.helpers import (
    registration_drawn,
    registration_window_open,
    registrations_made,
    staff_client,
)

pytestmark = pytest.mark.django_db

LIST = "/admin/queueing/registration/"


@pytest.fixture
def boss() -> Client:
    return staff_client("boss", superuser=True)


def test_the_on_sales_change_form_shows_its_window_and_where_to_set_it(boss, event) -> None:
    page = boss.get(f"/admin/events/event/{event.pk}/change/").content.decode()
    assert "Registration and draw" in page and "None: sold first come." in page
    assert 'href="/dashboard/events/onsale/#registration"' in page
    window = registration_drawn(event, by_shop=3, winners=1, waitlist=1)
    page = boss.get(f"/admin/events/event/{event.pk}/change/").content.decode()
    assert "1 winners and 1 waitlisted per tier" in page
    assert f"3 in the list, root {window.list_root}" in page
    assert boss.get("/admin/events/event/add/").status_code == 200


def test_registrations_are_listed_read_only_paged_and_without_addresses(boss, event) -> None:
    registration_window_open(event)
    made = registrations_made(event, by_mail=2, by_shop=1)
    listing = boss.get(LIST)
    assert listing.status_code == 200
    html = listing.content.decode()
    assert made[0].hash in html and "fan0@example.com" not in html
    assert listing.context["cl"].show_full_result_count is False
    assert listing.context["cl"].list_per_page == 100
    assert 'href="/admin/queueing/registration/add/"' not in html
    one = Registration.objects.get(public_hash=made[0].hash)
    detail = boss.get(f"{LIST}{one.pk}/change/").content.decode()
    assert one.public_hash in detail
    assert "fan0@example.com" not in detail and one.identity_hash not in detail
    assert boss.post(f"{LIST}{one.pk}/change/", {}).status_code == 403
    assert boss.post(f"{LIST}{one.pk}/delete/", {"post": "yes"}).status_code == 403
    assert boss.get(f"{LIST}add/").status_code == 403
    assert Registration.objects.filter(event=event).count() == 3


def test_staff_who_may_see_on_sales_see_the_list_and_others_do_not(event) -> None:
    registration_window_open(event)
    registrations_made(event, by_shop=1)
    assert staff_client("vic", "view_event").get(LIST).status_code == 200
    assert staff_client("nobody").get(LIST).status_code == 403
