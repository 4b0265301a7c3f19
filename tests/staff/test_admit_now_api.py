"""``POST /api/v1/manage/events/{slug}/admit-now``: the admin's "admit N now" over the staff
API, with its guard rails (staff/admit_now_api.py)."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from events.models import Event, EventMode
from queueing.beat import event_tick
from queueing.line.admission import ADMISSION_LOCK_NAMESPACE
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from staff.sell_out import event_sell_out
from staff.services import event_close, event_pause, event_update
from tests.helpers import STAFF_API, fans_join, staff_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def carl() -> APIClient:
    return staff_client("carl", "view_event", "change_event", api=True, token=True)


def admit(client: APIClient, slug: str, body: object) -> object:
    return client.post(f"{STAFF_API}{slug}/admit-now", body, format="json")


def started(make_event, *, fans: int, **fields) -> Event:
    """An on-sale whose line has started, ``fans`` in it, and a pace that lets nobody in."""
    event = make_event(rate_per_minute=1, **fields)
    fans_join(event.slug, fans)
    # The first tick spends the pace's one admission of the minute.
    event_tick(event_id=event.id, now=timezone.now())
    return Event.objects.get(pk=event.pk)


def admitted() -> int:
    return QueueEntry.objects.filter(status="admitted").count()


def test_staff_let_n_fans_in_past_the_pace_audited_as_theirs(carl, make_event) -> None:
    event = started(make_event, fans=6, capacity=100)
    before = admitted()
    response = admit(carl, event.slug, {"count": 3})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert admitted() == before + 3
    assert (body["event"], body["asked"], body["admitted"]) == (event.slug, 3, 3)
    assert body["by_tier"] == {"General": 3}
    assert body["short_because"] is None
    assert (body["active"], body["capacity"]) == (before + 3, 100)
    let_in = QueueEntry.objects.filter(public_id__in=body["ticket_ids"], status="admitted")
    assert let_in.count() == 3
    records = AuditRecord.objects.filter(event=event, action="admitted", actor="staff:carl")
    assert sorted(str(r.ticket_id) for r in records) == sorted(body["ticket_ids"])
    assert audit_chain_verify(event_id=event.id).ok


def test_never_past_the_capacity_and_says_so(carl, make_event) -> None:
    event = started(make_event, fans=8, capacity=3)
    body = admit(carl, event.slug, {"count": 10}).json()
    assert admitted() == 3
    assert (body["admitted"], body["short_because"], body["active"]) == (2, "capacity", 3)


def test_a_short_line_lets_in_who_there_is(carl, make_event) -> None:
    event = started(make_event, fans=3, capacity=0)
    body = admit(carl, event.slug, {"count": 50}).json()
    assert (body["admitted"], body["short_because"], body["capacity"]) == (2, "line", 0)


def test_paused_on_sales_may_still_be_let_in_by_hand(carl, make_event) -> None:
    event = started(make_event, fans=3, capacity=10)
    event_pause(event=event, actor="test", now=timezone.now())
    assert admit(carl, event.slug, {"count": 1}).json()["admitted"] == 1


@pytest.mark.parametrize(
    "body", [{}, {"count": 0}, {"count": 10_001}, {"count": "many"}, {"count": -1}, {"count": 1.5}]
)
def test_n_is_a_whole_number_from_1_to_10000(carl, make_event, body) -> None:
    event = started(make_event, fans=2)
    before = admitted()
    response = admit(carl, event.slug, body)
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert set(response.json()["fields"]) == {"count"}
    assert admitted() == before


def _closed(event: Event) -> None:
    event_close(event=event, actor="test", now=timezone.now())


def _sold_out(event: Event) -> None:
    event_sell_out(event=event, message=None, actor="test", now=timezone.now())


def _maintenance(event: Event) -> None:
    event_update(
        event=event, actor="test", now=timezone.now(), changes={"mode": EventMode.MAINTENANCE}
    )


@pytest.mark.parametrize(
    ("make_it_so", "code"),
    [(_closed, "event_closed"), (_sold_out, "event_sold_out"), (_maintenance, "event_maintenance")],
)
def test_an_on_sale_that_cannot_admit_is_a_409(carl, make_event, make_it_so, code) -> None:
    event = started(make_event, fans=3)
    make_it_so(event)
    before = admitted()
    response = admit(carl, event.slug, {"count": 2})
    assert response.status_code == 409
    assert response.json()["error"] == code
    assert event.name in response.json()["detail"]
    assert admitted() == before


def test_before_the_start_is_a_409_not_open(carl, make_event) -> None:
    event = make_event(starts_at=timezone.now() + timedelta(hours=1))
    fans_join(event.slug, 2)
    response = admit(carl, event.slug, {"count": 2})
    assert (response.status_code, response.json()["error"]) == (409, "event_not_open")


def test_an_archived_on_sale_is_gone_for_good(carl, make_event) -> None:
    event = started(make_event, fans=2)
    _closed(event)
    Event.objects.filter(pk=event.pk).update(archived_at=timezone.now())
    response = admit(carl, event.slug, {"count": 1})
    assert (response.status_code, response.json()["error"]) == (410, "event_archived")


def test_who_may_admit(make_event) -> None:
    event = started(make_event, fans=3)
    before = admitted()
    assert admit(APIClient(), event.slug, {"count": 1}).status_code == 401
    viewer = staff_client("vera", "view_event", api=True, token=True)
    response = admit(viewer, event.slug, {"count": 1})
    assert (response.status_code, response.json()["error"]) == (403, "forbidden")
    assert admitted() == before
    carl = staff_client("carl", "change_event", api=True, token=True)
    missing = admit(carl, "no-such-sale", {"count": 1})
    assert (missing.status_code, missing.json()["error"]) == (404, "event_not_found")


def test_a_run_under_way_is_a_409_conflict_to_retry(carl, make_event) -> None:
    # No tick here: its lock would last as long as this test's transaction.
    event = make_event()
    fans_join(event.slug, 3)
    before = admitted()
    # Another connection holds the on-sale's admission lock, as a running tick would.
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        password=settings["PASSWORD"],
        dbname=settings["NAME"],
    ) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [ADMISSION_LOCK_NAMESPACE, event.id])
        response = admit(carl, event.slug, {"count": 1})
    assert (response.status_code, response.json()["error"]) == (409, "conflict")
    assert response["Retry-After"] == "1"
    assert admitted() == before
