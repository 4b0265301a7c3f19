"""The staff API's webhook endpoints: registered with a secret shown once, changed, rotated,
removed, their deliveries listed a page at a time with every attempt; refusals in the
contract's form; the model permissions each method needs. And the admin's pages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone
from rest_framework.test import APIClient

from queueing.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from queueing.webhooks.emitting import webhook_emit
from tests.helpers import staff_client, staff_user

pytestmark = pytest.mark.django_db

API = "/api/v1/manage/webhooks/"
ALL_PERMS = ("view", "add", "change", "delete")


def _granted(user, *actions: str):
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="queueing",
            codename__in=[f"{action}_webhookendpoint" for action in actions],
        )
    )
    return user


def _client(*actions: str, username: str = "ann") -> APIClient:
    client = APIClient()
    client.force_authenticate(_granted(staff_user(username), *actions))
    return client


@pytest.fixture
def staff() -> APIClient:
    return _client(*ALL_PERMS)


def _create(staff: APIClient, **fields):
    body = {"url": "https://hooks.example.com/room", "types": ["onsale.paused"], **fields}
    return staff.post(API, body, format="json")


def test_register_shows_the_secret_once(staff, event) -> None:
    made = _create(staff, event=event.slug, description="Slack relay")
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["secret"].startswith("whsec_") and len(body["secret"]) > 40
    assert (body["event"], body["types"], body["enabled"]) == (
        event.slug,
        ["onsale.paused"],
        True,
    )
    assert body["created_by"] == "staff:ann"
    read = staff.get(f"{API}{body['id']}/").json()
    assert "secret" not in read
    assert [e["id"] for e in staff.get(API).json()] == [body["id"]]
    # Not in the database as such either: sealed.
    assert body["secret"] not in WebhookEndpoint.objects.get().secret_sealed


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "http://hooks.example.com/"}, "url"),
        ({"url": "https://10.0.0.8/hook"}, "url"),
        ({"url": "https://169.254.169.254/latest"}, "url"),
        ({"url": "https://localhost:8000/"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"types": []}, "types"),
        ({"types": ["onsale.exploded"]}, "types"),
        ({"event": "no-such-sale"}, "event"),
    ],
)
def test_refusals_name_the_field(staff, settings, fields, field) -> None:
    settings.WR_WEBHOOK_ALLOW_HTTP = False
    settings.WR_WEBHOOK_ALLOWED_NETWORKS = []
    refused = _create(staff, **fields)
    assert refused.status_code == 400
    body = refused.json()
    assert (body["error"], list(body["fields"])) == ("validation_error", [field])


def test_change_rotate_and_remove(staff) -> None:
    endpoint = _create(staff).json()
    url = f"{API}{endpoint['id']}/"
    changed = staff.patch(
        url, {"types": ["onsale.closed", "onsale.paused"], "enabled": False}, format="json"
    )
    assert changed.status_code == 200, changed.json()
    assert (changed.json()["types"], changed.json()["enabled"]) == (
        ["onsale.closed", "onsale.paused"],
        False,
    )
    rotated = staff.post(f"{url}rotate-secret").json()
    assert rotated["secret"] != endpoint["secret"]
    assert rotated["previous_secret_until"] is not None
    assert staff.delete(url).status_code == 204
    gone = staff.get(url)
    assert (gone.status_code, gone.json()["error"]) == (404, "webhook_not_found")


def test_deliveries_a_page_at_a_time_with_their_attempts(staff, event) -> None:
    endpoint = _create(staff).json()
    now = timezone.now()
    for _ in range(3):
        webhook_emit(event=event, type="onsale.paused", now=now)
    first = WebhookDelivery.objects.order_by("id").first()
    WebhookAttempt.objects.create(
        delivery=first, number=1, started_at=now, duration_ms=12, status_code=500, error="x"
    )
    page = staff.get(f"{API}{endpoint['id']}/deliveries/?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"]
    rest = staff.get(page["next"]).json()
    assert [d["id"] for d in rest["results"]] == [str(first.public_id)]
    delivery = rest["results"][0]
    assert (delivery["type"], delivery["state"]) == ("onsale.paused", "pending")
    assert delivery["next_attempt_at"] is not None
    assert delivery["attempts"] == [
        {
            "number": 1,
            "started_at": now.isoformat(),
            "duration_ms": 12,
            "status_code": 500,
            "response_excerpt": "",
            "error": "x",
        }
    ]


def test_each_method_needs_its_permission(event) -> None:
    reader = _client("view", username="rita")
    assert reader.get(API).status_code == 200
    refused = _create(reader)
    assert refused.status_code == 403
    assert "queueing.add_webhookendpoint" in refused.json()["detail"]
    endpoint = _create(_client(*ALL_PERMS)).json()
    assert reader.delete(f"{API}{endpoint['id']}/").status_code == 403
    assert reader.post(f"{API}{endpoint['id']}/rotate-secret").status_code == 403
    assert _client(username="nora").get(API).status_code == 403
    assert APIClient().get(API).status_code == 401


def test_the_admin_shows_a_new_secret_once_and_every_attempt(event, settings) -> None:
    admin = staff_client("root", superuser=True)
    added = admin.post(
        "/admin/queueing/webhookendpoint/add/",
        {"url": "https://hooks.example.com/x", "types": ["onsale.paused"], "enabled": "on"},
    )
    assert added.status_code == 200
    assert b"webhook-secret" in added.content and b"whsec_" in added.content
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.created_by == "staff:root"
    webhook_emit(event=event, type="onsale.paused", now=timezone.now())
    delivery = WebhookDelivery.objects.get()
    WebhookAttempt.objects.create(
        delivery=delivery,
        number=1,
        started_at=timezone.now(),
        duration_ms=5,
        status_code=502,
        error="answered 502",
    )
    page = admin.get(f"/admin/queueing/webhookdelivery/{delivery.pk}/change/")
    assert page.status_code == 200 and b"answered 502" in page.content
    rotated = admin.post(
        "/admin/queueing/webhookendpoint/",
        {"action": "rotate_secrets", "_selected_action": [endpoint.pk]},
    )
    assert rotated.status_code == 200 and b"whsec_" in rotated.content
    settings.WR_WEBHOOK_ALLOWED_NETWORKS = []  # production's default
    refused = admin.post(
        "/admin/queueing/webhookendpoint/add/",
        {"url": "https://10.0.0.1/", "types": ["onsale.paused"]},
    )
    assert refused.status_code == 200 and b"not a public address" in refused.content
    assert WebhookEndpoint.objects.count() == 1
