"""The staff API's on-sale list: paged newest first, searched, filtered by state; bad paging
input is a 400, never a 404 or a silent default (staff/event_list.py)."""

from __future__ import annotations

import base64
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from events.models import Event
from staff.event_list import PAGE_SIZE, PAGE_SIZE_MAX
from tests.helpers import STAFF_API, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer() -> APIClient:
    return staff_client("vera", "view_event", api=True, token=True)


def _slugs(body: dict) -> list[str]:
    return [event["slug"] for event in body["results"]]


def _walk(client: APIClient, url: str) -> list[str]:
    slugs: list[str] = []
    while url:
        body = client.get(url).json()
        slugs += _slugs(body)
        url = body["next"]
    return slugs


def test_the_list_is_paged_newest_first_and_every_on_sale_is_met_once(viewer, make_event) -> None:
    for n in range(7):
        make_event(slug=f"sale-{n}")
    # Two on-sales created in the same instant are still each listed once.
    Event.objects.filter(slug__in=["sale-2", "sale-3"]).update(
        created_at=Event.objects.get(slug="sale-2").created_at
    )
    first = viewer.get(STAFF_API, {"page_size": 3}).json()
    assert set(first) == {"next", "previous", "results"}
    assert first["previous"] is None
    assert _slugs(first) == ["sale-6", "sale-5", "sale-4"]
    everything = _walk(viewer, f"{STAFF_API}?page_size=3")
    assert sorted(everything) == [f"sale-{n}" for n in range(7)]
    assert len(everything) == 7
    second = viewer.get(first["next"]).json()
    assert _slugs(viewer.get(second["previous"]).json()) == _slugs(first)


def test_the_default_page_holds_fifty(viewer, make_event) -> None:
    for n in range(PAGE_SIZE + 1):
        make_event(slug=f"sale-{n}")
    body = viewer.get(STAFF_API).json()
    assert len(body["results"]) == PAGE_SIZE
    assert body["next"] is not None


def test_search_by_name_or_slug_and_filter_by_state(viewer, make_event) -> None:
    now = timezone.now()
    make_event(slug="arena-tour")
    later = make_event(slug="summer", starts_at=now + timedelta(days=2))
    make_event(
        slug="winter", prequeue_opens_at=now + timedelta(days=1), starts_at=now + timedelta(days=2)
    )
    closed = make_event(slug="spring")
    staff = staff_client("carl", "change_event", api=True, token=True)
    assert staff.post(f"{STAFF_API}{closed.slug}/close").status_code == 200
    Event.objects.filter(pk=later.pk).update(name="Summer ARENA night")

    assert _slugs(viewer.get(STAFF_API, {"q": "arena"}).json()) == ["summer", "arena-tour"]
    assert _slugs(viewer.get(STAFF_API, {"q": "WINT"}).json()) == ["winter"]
    assert _slugs(viewer.get(STAFF_API, {"state": "closed"}).json()) == ["spring"]
    assert _slugs(viewer.get(STAFF_API, {"state": "open"}).json()) == ["arena-tour"]
    both = viewer.get(f"{STAFF_API}?state=prequeue&state=scheduled").json()
    assert _slugs(both) == ["winter", "summer"]
    assert _slugs(viewer.get(STAFF_API, {"q": "arena", "state": "prequeue"}).json()) == ["summer"]
    # The next page keeps the search.
    page = viewer.get(STAFF_API, {"q": "arena", "page_size": 1}).json()
    assert parse_qs(urlsplit(page["next"]).query)["q"] == ["arena"]
    assert _slugs(viewer.get(page["next"]).json()) == ["arena-tour"]


def _cursor(raw: str) -> str:
    return base64.b64encode(raw.encode()).decode()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"page_size": "0"}, "page_size"),
        ({"page_size": str(PAGE_SIZE_MAX + 1)}, "page_size"),
        ({"page_size": "ten"}, "page_size"),
        ({"page_size": "-5"}, "page_size"),
        ({"cursor": "not a cursor"}, "cursor"),
        ({"cursor": _cursor("p=yesterday")}, "cursor"),
        ({"cursor": _cursor("p=2026-11-27 10:00:00")}, "cursor"),
        ({"cursor": _cursor("o=x")}, "cursor"),
        ({"state": "sold"}, "state"),
        ({"q": "x" * 201}, "q"),
        ({"q": "a\x00b"}, "q"),
    ],
)
def test_bad_paging_or_filter_input_is_a_400_naming_the_field(viewer, event, params, field) -> None:
    response = viewer.get(STAFF_API, params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "validation_error"
    assert set(body["fields"]) == {field}


def test_a_cursor_this_list_gave_is_accepted(viewer, make_event) -> None:
    for n in range(3):
        make_event(slug=f"sale-{n}")
    following = viewer.get(STAFF_API, {"page_size": 1}).json()["next"]
    cursor = parse_qs(urlsplit(following).query)["cursor"][0]
    assert viewer.get(STAFF_API, {"page_size": 1, "cursor": cursor}).status_code == 200


def test_listing_needs_the_right_to_view(make_event) -> None:
    make_event()
    assert APIClient().get(STAFF_API).status_code == 401
    nobody = staff_client("nora", api=True, token=True)
    assert nobody.get(STAFF_API).json()["error"] == "forbidden"
