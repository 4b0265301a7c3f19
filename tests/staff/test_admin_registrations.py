"""A draw in the admin (staff/admin_registrations.py): the window on the on-sale's change form,
set there through the staff API's checks and service and read-only once drawn; the
registrations read-only and paged, without addresses."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.models import AuditAction, AuditRecord, Registration, RegistrationWindow
from tests.helpers import (
    STAFF_API,
    registration_drawn,
    registration_window_open,
    registrations_made,
    staff_client,
)
from tests.staff.admin_forms import change_form_data

pytestmark = pytest.mark.django_db

LIST = "/admin/queueing/registration/"
WINDOW = "registration_window-0-"
SHOP_KEY = "s" * 40


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


def window_form(
    client: Client, url: str, *, opens: datetime, closes: datetime, **fields: str
) -> dict[str, list[str]]:
    """The change form as it stands, its window's inline filled in as staff would."""
    form = change_form_data(client, url)
    for name, at in (("opens_at", opens), ("closes_at", closes)):
        local = timezone.localtime(at)
        form[f"{WINDOW}{name}_0"] = [local.strftime("%Y-%m-%d")]
        form[f"{WINDOW}{name}_1"] = [local.strftime("%H:%M:%S")]
    for name, value in {"winners": "100", "waitlist": "20", "invitation_hours": "24"}.items():
        form[f"{WINDOW}{name}"] = [fields.pop(name, value)]
    for name, value in fields.items():
        form[f"{WINDOW}{name}"] = [value]
    return form


def window_set_records(event) -> list[AuditRecord]:
    found = AuditRecord.objects.filter(event=event, action=AuditAction.REGISTRATION_WINDOW_SET)
    return list(found.order_by("id"))


def test_staff_who_may_change_on_sales_set_the_window_audited_as_by_the_api(make_event) -> None:
    event, twin = make_event(slug="onsale"), make_event(slug="twin")
    carl = staff_client("carl", "view_event", "change_event")
    url = f"/admin/events/event/{event.pk}/change/"
    opens = timezone.now().replace(microsecond=0) + timedelta(hours=1)
    closes = opens + timedelta(days=2)
    form = window_form(carl, url, opens=opens, closes=closes, new_shop_key=SHOP_KEY)
    assert carl.post(url, form).status_code == 302
    window = RegistrationWindow.objects.get(event=event)
    assert (window.opens_at, window.closes_at) == (opens, closes)
    assert (window.winners, window.waitlist, window.invitation_hours) == (100, 20, 24)
    assert window.shop_key == SHOP_KEY
    # The same window through the staff API: the same record, but for the on-sale.
    body = {
        "opens_at": opens.isoformat(),
        "closes_at": closes.isoformat(),
        "winners": 100,
        "waitlist": 20,
        "invitation_hours": 24,
        "shop_key": SHOP_KEY,
    }
    api = staff_client("cleo", "view_event", "change_event", api=True, token=True)
    assert api.put(f"{STAFF_API}twin/registration", body, format="json").status_code == 200
    [by_admin], [by_api] = window_set_records(event), window_set_records(twin)
    assert by_admin.actor == "staff:carl" and by_admin.data == by_api.data
    assert by_admin.data["shop_key"] == "set"

    # Never shown again; an empty key keeps it, and the route can be turned off.
    page = carl.get(url).content.decode()
    assert SHOP_KEY not in page and "set (the shop&#x27;s route is on)" in page
    assert carl.post(url, window_form(carl, url, opens=opens, closes=closes, winners="5"))
    window.refresh_from_db()
    assert (window.winners, window.shop_key) == (5, SHOP_KEY)
    off = window_form(carl, url, opens=opens, closes=closes, remove_shop_key="on")
    assert carl.post(url, off).status_code == 302
    window.refresh_from_db()
    assert window.shop_key == ""
    assert [r.data["shop_key"] for r in window_set_records(event)] == ["set", "set", ""]


def test_an_on_sale_saved_without_touching_its_window_leaves_it_be(boss, event) -> None:
    url = f"/admin/events/event/{event.pk}/change/"
    assert boss.post(url, change_form_data(boss, url)).status_code == 302
    assert not RegistrationWindow.objects.filter(event=event).exists()
    assert window_set_records(event) == []
    window = registration_window_open(event)  # its times to the microsecond
    assert boss.post(url, change_form_data(boss, url)).status_code == 302
    assert RegistrationWindow.objects.get(event=event).opens_at == window.opens_at
    assert len(window_set_records(event)) == 1


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"closes_in_hours": "-1"}, "after opens_at"),
        ({"winners": "-1"}, "greater than or equal to 0"),
        ({"invitation_hours": "721"}, "less than or equal to 720"),
        ({"new_shop_key": "short"}, "at least 32 characters"),
        ({"new_shop_key": SHOP_KEY, "remove_shop_key": "on"}, "not both"),
    ],
)
def test_a_bad_window_is_refused_on_the_form(boss, event, fields, said) -> None:
    url = f"/admin/events/event/{event.pk}/change/"
    opens = timezone.now() + timedelta(hours=1)
    closes = opens + timedelta(hours=float(fields.pop("closes_in_hours", "24")))
    page = boss.post(url, window_form(boss, url, opens=opens, closes=closes, **fields))
    assert page.status_code == 200  # the form again, with the error
    html = page.content.decode()
    assert said in html and "Constraint" not in html
    assert not RegistrationWindow.objects.filter(event=event).exists()
    assert window_set_records(event) == []


def test_after_the_draw_the_window_is_read_only(boss, event) -> None:
    window = registration_drawn(event, by_shop=2, winners=1, waitlist=1)
    url = f"/admin/events/event/{event.pk}/change/"
    page = boss.get(url).content.decode()
    assert f'name="{WINDOW}winners"' not in page and 'name="{WINDOW}new_shop_key"' not in page
    assert window.list_root in page
    records, closes_at = len(window_set_records(event)), window.closes_at
    later = closes_at + timedelta(days=1)
    changed = window_form(boss, url, opens=window.opens_at, closes=later, winners="9")
    assert boss.post(url, changed).status_code == 302
    window.refresh_from_db()
    assert (window.winners, window.closes_at) == (1, closes_at)
    assert len(window_set_records(event)) == records


def test_staff_who_may_only_see_on_sales_see_the_window_but_cannot_set_it(event) -> None:
    registration_window_open(event, winners=7)
    viewer = staff_client("vic", "view_event")
    page = viewer.get(f"/admin/events/event/{event.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Registration window" in html and f'name="{WINDOW}winners"' not in html
    assert viewer.post(f"/admin/events/event/{event.pk}/change/", {}).status_code == 403
