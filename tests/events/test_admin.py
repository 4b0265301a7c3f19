import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from events.models import Event
from queueing.models import AuditRecord
from tests.conftest import join, new_fan

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_() -> Client:
    user = get_user_model().objects.create_superuser("boss", "b@example.com", "pw-123456")
    client = Client()
    client.force_login(user)
    return client


def test_creating_an_event_in_the_admin_goes_through_the_service(admin_client_) -> None:
    response = admin_client_.post(
        "/admin/events/event/add/",
        {
            "slug": "gig",
            "name": "Gig",
            "target_url": "https://shop.example/",
            "capacity": 10,
            "rate_per_minute": 60,
            "session_seconds": 900,
            "heartbeat_seconds": 60,
            "max_queue_length": 0,
            "max_wait_seconds": 0,
            "pow_difficulty": 0,
            "max_live_per_address": 3,
            "shuffle_at_start": "on",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    event = Event.objects.get(slug="gig")
    assert event.tiers.get().is_default
    assert event.max_live_per_address == 3
    record = AuditRecord.objects.get(event=event)
    assert (record.action, record.actor) == ("event_created", "staff:boss")


def test_admin_pages_render_with_tiers_and_codes_inline(admin_client_, event) -> None:
    page = admin_client_.get(f"/admin/events/event/{event.pk}/change/")
    assert page.status_code == 200
    assert b"Tiers" in page.content and b"Access codes" in page.content
    assert admin_client_.get("/admin/queueing/queueentry/").status_code == 200
    assert admin_client_.get("/admin/queueing/auditrecord/").status_code == 200


def test_admin_actions_pause_and_close_through_services(admin_client_, event) -> None:
    join(new_fan(), event.slug)
    for action in ("pause_events", "close_events"):
        admin_client_.post(
            "/admin/events/event/", {"action": action, "_selected_action": [event.pk]}
        )
    actions = list(
        AuditRecord.objects.filter(event=event).order_by("seq").values_list("action", flat=True)
    )
    assert actions[-2:] == ["event_paused", "event_closed"]


def test_the_audit_trail_is_read_only_in_the_admin(admin_client_, event) -> None:
    record = AuditRecord.objects.get(event=event)
    assert admin_client_.get("/admin/queueing/auditrecord/add/").status_code == 403
    assert admin_client_.post(f"/admin/queueing/auditrecord/{record.pk}/delete/").status_code == 403
