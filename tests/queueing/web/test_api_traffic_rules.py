"""``GET /api/v1/events/{slug}/traffic-rules`` (queueing/web/api_traffic_rules.py): the rules a
gate outside the room applies, in their canonical form, only to the on-sale's integration key."""

from __future__ import annotations

import pytest
from django.test import Client

from events.models import Event
from queueing.web.api_traffic_rules import rules_version

pytestmark = pytest.mark.django_db

RAW = [
    {"action": "bypass", "header": {"X-Partner-Key": "s3cret"}},
    {"action": "block", "user_agent": ["*BadBot*"], "ip": ["2001:DB8::/32", "10.0.0.7/32"]},
]
CANONICAL = [
    {"action": "bypass", "header": {"x-partner-key": "s3cret"}},
    {"action": "block", "ip": ["2001:db8::/32", "10.0.0.7"], "user_agent": ["*BadBot*"]},
]


def get(slug: str, key: str | None, **headers: str) -> object:
    if key is not None:
        headers["HTTP_AUTHORIZATION"] = key
    return Client().get(f"/api/v1/events/{slug}/traffic-rules", **headers)


@pytest.fixture
def event(make_event) -> Event:
    event = make_event(slug="tour")
    event.traffic_rules = RAW
    event.full_clean()  # as staff save it: validated, then stored as given here
    Event.objects.filter(pk=event.pk).update(traffic_rules=RAW)
    return event


def test_the_integration_key_gets_the_canonical_rules_and_their_version(event) -> None:
    response = get("tour", f"Bearer {event.integration_key}")
    assert response.status_code == 200
    body = response.json()
    assert body == {"traffic_rules": CANONICAL, "version": rules_version(CANONICAL)}
    assert response["ETag"] == f'"{body["version"]}"'
    assert response["Cache-Control"] == "private, max-age=10"
    assert "Authorization" in response["Vary"]
    # Lower-case scheme, as HTTP allows.
    assert get("tour", f"bearer {event.integration_key}").json() == body


def test_an_unchanged_list_costs_a_304_and_a_change_a_new_version(event) -> None:
    key = f"Bearer {event.integration_key}"
    version = get("tour", key).json()["version"]
    unchanged = get("tour", key, HTTP_IF_NONE_MATCH=f'"other", "{version}"')
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert unchanged["ETag"] == f'"{version}"'
    Event.objects.filter(pk=event.pk).update(traffic_rules=[])
    changed = get("tour", key, HTTP_IF_NONE_MATCH=f'"{version}"')
    assert changed.status_code == 200
    assert changed.json()["traffic_rules"] == []
    assert changed.json()["version"] not in (version, "")


def test_an_on_sale_without_rules_answers_an_empty_list(make_event) -> None:
    event = make_event(slug="plain")
    assert get("plain", f"Bearer {event.integration_key}").json()["traffic_rules"] == []


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Token abc", "Basic Zm9vOmJhcg==", "Bearer wrong-key"],
)
def test_without_the_on_sales_key_nothing_is_told(event, authorization) -> None:
    response = get("tour", authorization)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert "s3cret" not in response.content.decode()


def test_another_on_sales_key_is_refused(event, make_event) -> None:
    other = make_event(slug="other")
    assert get("tour", f"Bearer {other.integration_key}").status_code == 401


def test_an_unknown_slug_is_404_and_other_methods_405(event) -> None:
    response = get("nope", f"Bearer {event.integration_key}")
    assert response.status_code == 404
    assert response.json()["error"] == "event_not_found"
    posted = Client().post(
        "/api/v1/events/tour/traffic-rules", HTTP_AUTHORIZATION=f"Bearer {event.integration_key}"
    )
    assert posted.status_code == 405 and posted["Allow"] == "GET"


def test_stored_rules_that_do_not_parse_are_503_not_500(event) -> None:
    Event.objects.filter(pk=event.pk).update(traffic_rules=[{"action": "open-sesame"}])
    response = get("tour", f"Bearer {event.integration_key}")
    assert response.status_code == 503
    assert response.json()["error"] == "unavailable"
    assert response["Retry-After"] == "10"
