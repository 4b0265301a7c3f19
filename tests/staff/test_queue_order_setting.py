"""Staff give an on-sale its queue order (``fifo`` or ``random``) through the staff API and the
admin; it is fixed once anyone is in the line (400 ``queue_order_fixed``, or the admin's form
error), and the OpenAPI document lists it."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from events.models import Event
from queueing.models import AuditRecord
from tests.helpers import EDITOR, STAFF_API, fans_join, staff_api_create, staff_client
from tests.staff.admin_forms import change_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> APIClient:
    return staff_client("ann", *EDITOR, api=True, token=True)


def test_an_on_sale_is_fifo_unless_created_random(staff) -> None:
    assert staff_api_create(staff).json()["queue_order"] == "fifo"
    response = staff_api_create(staff, slug="draw", queue_order="random")
    assert response.status_code == 201, response.json()
    assert response.json()["queue_order"] == "random"
    created = AuditRecord.objects.filter(action="event_created").last()
    assert created.data["queue_order"] == "random"


def test_an_unknown_queue_order_is_a_bad_request(staff) -> None:
    response = staff_api_create(staff, queue_order="lottery")
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert "queue_order" in response.json()["fields"]
    assert not Event.objects.exists()


def test_the_queue_order_changes_before_anyone_joined_and_not_after(staff) -> None:
    staff_api_create(staff)
    response = staff.patch(f"{STAFF_API}tour/", {"queue_order": "random"}, format="json")
    assert response.status_code == 200, response.json()
    assert AuditRecord.objects.filter(action="event_changed").last().data["changes"][
        "queue_order"
    ] == ["fifo", "random"]
    fans_join("tour", 1)
    response = staff.patch(f"{STAFF_API}tour/", {"queue_order": "fifo"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "queue_order_fixed"
    assert "reorder" in response.json()["detail"]
    assert Event.objects.get().queue_order == "random"
    # Saying the same order again, or changing anything else, is fine.
    same = staff.patch(f"{STAFF_API}tour/", {"queue_order": "random"}, format="json")
    assert same.status_code == 200
    assert staff.patch(f"{STAFF_API}tour/", {"capacity": 9}, format="json").status_code == 200


def test_the_admin_refuses_a_change_of_order_after_joins(make_event) -> None:
    event = make_event()
    admin: Client = staff_client("boss", superuser=True)
    url = f"/admin/events/event/{event.pk}/change/"
    form = change_form_data(admin, url)
    form["queue_order"] = ["random"]
    assert admin.post(url, form).status_code == 302
    event.refresh_from_db()
    assert event.queue_order == "random"
    fans_join(event.slug, 1)
    form = change_form_data(admin, url)
    form["queue_order"] = ["fifo"]
    page = admin.post(url, form)
    assert page.status_code == 200  # the form again, with the error
    assert "reorder" in page.content.decode()
    event.refresh_from_db()
    assert event.queue_order == "random"


def test_the_openapi_document_lists_the_queue_order() -> None:
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    listed = [
        name
        for name, component in schema["components"]["schemas"].items()
        if "queue_order" in component.get("properties", {})
    ]
    assert listed, "no schema component has queue_order"
