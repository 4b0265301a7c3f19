"""Staff give an on-sale its lanes (1-64) through the staff API and the admin; the number is
fixed once anyone is in the line (409 ``lanes_fixed``, or the admin's form error)."""

import pytest
from django.test import Client
from django.utils import translation
from rest_framework.test import APIClient

from events.models import Event
from queueing.models import AuditRecord
from queueing.rules.errors import LanesFixed
from tests.helpers import EDITOR, STAFF_API, fans_join, staff_api_create, staff_client
from tests.staff.admin_forms import change_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> APIClient:
    return staff_client("ann", *EDITOR, api=True, token=True)


def test_an_on_sale_has_one_lane_unless_staff_give_it_more(staff) -> None:
    assert staff_api_create(staff).json()["lanes"] == 1
    response = staff.patch(f"{STAFF_API}tour/", {"lanes": 8}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["lanes"] == 8
    changed = AuditRecord.objects.filter(action="event_changed").last()
    assert changed.data["changes"]["lanes"] == [1, 8]


@pytest.mark.parametrize("lanes", [0, 65, -1, "many"])
def test_lanes_out_of_bounds_are_a_bad_request_that_says_the_bounds(staff, lanes) -> None:
    response = staff_api_create(staff, lanes=lanes)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "validation_error"
    if lanes != "many":
        assert body["fields"]["lanes"] == ["An on-sale has 1 to 64 lanes."]
    assert not Event.objects.exists()


def test_lanes_are_fixed_once_anyone_joined(staff) -> None:
    staff_api_create(staff, lanes=4)
    fans_join("tour", 1)
    response = staff.patch(f"{STAFF_API}tour/", {"lanes": 8}, format="json")
    assert response.status_code == 409
    assert response.json()["error"] == "lanes_fixed"
    assert "lanes" in response.json()["detail"]
    assert Event.objects.get().lanes == 4
    # Saying the same number again, or changing anything else, is fine.
    assert staff.patch(f"{STAFF_API}tour/", {"lanes": 4}, format="json").status_code == 200
    assert staff.patch(f"{STAFF_API}tour/", {"capacity": 9}, format="json").status_code == 200


def test_the_admin_refuses_a_change_of_lanes_after_joins_in_the_staff_language(make_event) -> None:
    event = make_event(lanes=2)
    fans_join(event.slug, 1)
    admin = staff_client("boss", superuser=True)
    url = f"/admin/events/event/{event.pk}/change/"
    form = change_form_data(admin, url)
    form["lanes"] = ["3"]
    page = admin.post(url, form, headers={"accept-language": "fr"})
    assert page.status_code == 200  # the form again, with the error
    with translation.override("fr"):
        said = translation.gettext(LanesFixed.default_detail)
    assert said != LanesFixed.default_detail
    html = page.content.decode()
    assert said.replace("'", "&#x27;") in html or said in html
    event.refresh_from_db()
    assert event.lanes == 2


def test_the_admin_sets_lanes_within_bounds_before_anyone_joined(make_event) -> None:
    event = make_event()
    admin: Client = staff_client("boss", superuser=True)
    url = f"/admin/events/event/{event.pk}/change/"
    form = change_form_data(admin, url)
    form["lanes"] = ["65"]
    assert admin.post(url, form).status_code == 200
    form["lanes"] = ["16"]
    assert admin.post(url, form).status_code == 302
    event.refresh_from_db()
    assert event.lanes == 16
