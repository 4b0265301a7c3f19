"""Each webhook type told once, from its real trigger; nothing told of a change undone; the
fans' join and poll do no webhook work at all."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.audit_verdicts import verdict_check
from events.models import Event
from queueing.beat import event_beat
from queueing.line.activity import events_with_work
from queueing.models import AuditRecord, WebhookDelivery
from queueing.rules.webhooks import WEBHOOK_TYPES
from staff import services
from staff.sell_out import event_sell_out
from staff.webhooks import endpoint_create
from tests.helpers import join, new_fan, poll

pytestmark = pytest.mark.django_db

ALL = list(WEBHOOK_TYPES)


@pytest.fixture
def hears_all(db, settings):
    """An endpoint of every on-sale hearing every type."""
    return endpoint_create(
        url="https://hooks.example.com/room", types=ALL, actor="staff:ann", now=timezone.now()
    ).endpoint


def told() -> Counter:
    return Counter(WebhookDelivery.objects.values_list("type", flat=True))


def body_of(type: str) -> dict:
    return json.loads(WebhookDelivery.objects.get(type=type).body)


def test_created_and_started_are_told_once_with_the_on_sale(hears_all, make_event) -> None:
    event = make_event(slug="tour")
    assert told() == {"onsale.created": 1, "onsale.started": 1}
    body = body_of("onsale.created")
    assert body["type"] == "onsale.created"
    assert body["event"] == {"slug": "tour", "name": event.name, "state": "open", "mode": "queue"}
    assert body["id"] == str(WebhookDelivery.objects.get(type="onsale.created").public_id)


def test_a_scheduled_start_is_told_by_the_tick_that_starts_the_line(hears_all, make_event) -> None:
    now = timezone.now()
    event = make_event(starts_at=now + timedelta(minutes=5))
    assert told() == {"onsale.created": 1}
    event_beat(event_id=event.id, now=now + timedelta(minutes=5, seconds=1))
    event_beat(event_id=event.id, now=now + timedelta(minutes=5, seconds=2))
    assert told()["onsale.started"] == 1
    assert body_of("onsale.started")["data"] == {"prequeue": 0, "shuffled": True}


def test_pause_resume_close_each_once(hears_all, event, django_capture_on_commit_callbacks) -> None:
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        services.event_pause(event=event, actor="staff:ann", now=now)
        services.event_pause(event=event, actor="staff:ann", now=now)  # already paused
        services.event_resume(event=event, actor="staff:ann", now=now)
        services.event_close(event=event, actor="staff:ann", now=now)
        services.event_close(event=event, actor="staff:ann", now=now)
    counts = told()
    assert (counts["onsale.paused"], counts["onsale.resumed"], counts["onsale.closed"]) == (1, 1, 1)
    assert body_of("onsale.closed")["data"] == {"by": "staff:ann"}
    assert body_of("onsale.closed")["event"]["state"] == "closed"


def test_sold_out_is_told_once_and_not_as_a_close(hears_all, event) -> None:
    now = timezone.now()
    event_sell_out(event=event, message="All gone", actor="shop", now=now)
    event_sell_out(event=event, message="All gone", actor="shop", now=now)
    assert told()["onsale.sold_out"] == 1
    assert told()["onsale.closed"] == 0
    assert body_of("onsale.sold_out")["data"] == {"message": "All gone", "by": "shop"}


def test_a_mode_change_is_told_with_both_modes(hears_all, event) -> None:
    now = timezone.now()
    services.event_update(event=event, actor="staff:ann", now=now, changes={"mode": "safety_net"})
    services.event_update(event=event, actor="staff:ann", now=now, changes={"mode": "safety_net"})
    services.event_update(event=event, actor="staff:ann", now=now, changes={"capacity": 7})
    assert told()["onsale.mode_changed"] == 1
    assert body_of("onsale.mode_changed")["data"] == {
        "from": "queue",
        "to": "safety_net",
        "by": "staff:ann",
    }


def test_safety_net_queueing_then_the_line_emptied_told_by_the_tick(hears_all, make_event) -> None:
    event = make_event(mode="safety_net", capacity=1, rate_per_minute=0)
    first = join(new_fan(), event.slug).json()
    assert first["status"] == "admitted"  # nobody in line: straight in
    second = join(new_fan(), event.slug).json()
    assert second["status"] == "waiting"  # the shop is full: the line forms
    assert told()["onsale.safety_net_queueing"] == 0  # never from the join
    now = timezone.now()
    event_beat(event_id=event.id, now=now)
    event_beat(event_id=event.id, now=now + timedelta(seconds=1))
    assert told()["onsale.safety_net_queueing"] == 1
    new_fan().delete(f"/api/v1/tickets/{second['ticket']}")
    assert told()["onsale.line_emptied"] == 0  # never from the fan's leaving
    event_beat(event_id=event.id, now=now + timedelta(seconds=2))
    event_beat(event_id=event.id, now=now + timedelta(seconds=3))
    assert told()["onsale.line_emptied"] == 1


def test_the_line_emptied_by_admission_in_queue_mode(hears_all, make_event) -> None:
    event = make_event(capacity=5, rate_per_minute=0)
    join(new_fan(), event.slug)
    now = timezone.now()
    # The tick admits before it looks at the line: it never saw one, so nothing to tell.
    event_beat(event_id=event.id, now=now)
    assert told()["onsale.line_emptied"] == 0
    join(new_fan(), event.slug)
    services.event_pause(event=event, actor="staff:ann", now=now)
    event_beat(event_id=event.id, now=now + timedelta(seconds=1))  # paused: the fan waits
    assert told()["onsale.safety_net_queueing"] == 0  # queue mode: a line is no news
    services.event_resume(event=event, actor="staff:ann", now=now)
    event_beat(event_id=event.id, now=now + timedelta(seconds=2))
    assert told()["onsale.line_emptied"] == 1


def test_the_end_passing_is_told_once_as_a_close_by_the_schedule(hears_all, make_event) -> None:
    now = timezone.now()
    event = make_event(capacity=0, ends_at=now + timedelta(minutes=1))
    services.event_pause(event=event, actor="staff:ann", now=now)
    join(new_fan(), event.slug)
    after = now + timedelta(minutes=2)
    event_beat(event_id=event.id, now=after)
    event_beat(event_id=event.id, now=after + timedelta(seconds=1))
    assert told()["onsale.closed"] == 1
    assert body_of("onsale.closed")["data"]["by"] == "schedule"
    assert told()["onsale.line_emptied"] == 0  # emptied by the close, which was told


def test_a_broken_chain_is_told_once(hears_all, event) -> None:
    now = timezone.now()
    verdict_check(event, now=now)
    assert told()["onsale.chain_verification_failed"] == 0
    target = AuditRecord.objects.filter(event=event).order_by("seq").first()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE queueing_auditrecord SET actor = 'x' WHERE id = %s", [target.id])
    verdict_check(event, now=now, from_start=True)
    verdict_check(event, now=now, from_start=True)  # still broken: not news
    assert told()["onsale.chain_verification_failed"] == 1
    assert body_of("onsale.chain_verification_failed")["data"]["first_bad_seq"] == target.seq


def test_only_the_listening_endpoints_of_the_on_sale_are_told(make_event) -> None:
    now = timezone.now()
    tour, other = make_event(slug="tour"), make_event(slug="other")
    paused = endpoint_create(
        url="https://a.example.com/", types=["onsale.paused"], event=tour, actor="x", now=now
    ).endpoint
    endpoint_create(url="https://b.example.com/", types=["onsale.closed"], actor="x", now=now)
    off = endpoint_create(
        url="https://c.example.com/", types=ALL, actor="x", now=now, enabled=False
    ).endpoint
    services.event_pause(event=tour, actor="staff:ann", now=now)
    services.event_pause(event=other, actor="staff:ann", now=now)
    assert list(WebhookDelivery.objects.values_list("endpoint_id", "type")) == [
        (paused.id, "onsale.paused")
    ]
    assert not WebhookDelivery.objects.filter(endpoint=off).exists()


def test_a_change_undone_tells_nobody(hears_all, event) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        services.event_pause(event=event, actor="staff:ann", now=timezone.now())
        raise RuntimeError("undone")
    assert told()["onsale.paused"] == 0
    assert Event.objects.get(pk=event.pk).control == "running"


def test_joining_and_polling_do_no_webhook_work(hears_all, make_event) -> None:
    event = make_event(mode="safety_net", capacity=1, rate_per_minute=0)
    before = told()
    with CaptureQueriesContext(connection) as queries:
        fans = [join(new_fan(), event.slug).json() for _ in range(3)]
        for fan in fans:
            poll(fan["ticket"])
        new_fan().delete(f"/api/v1/tickets/{fans[-1]['ticket']}")
    assert told() == before
    touched = [q["sql"] for q in queries.captured_queries if "webhook" in q["sql"].lower()]
    assert touched == []
    assert not [q for q in queries.captured_queries if "linewatch" in q["sql"].lower()]


def test_a_line_left_by_its_last_fan_with_nobody_in_the_room_still_ticks_once_more(
    hears_all, event
) -> None:
    now = timezone.now()
    services.event_pause(event=event, actor="staff:ann", now=now)
    fan = join(new_fan(), event.slug).json()
    event_beat(event_id=event.id, now=now)
    new_fan().delete(f"/api/v1/tickets/{fan['ticket']}")
    assert events_with_work(now) == [event.id]  # nobody in the room, but the line was seen
    event_beat(event_id=event.id, now=now + timedelta(seconds=1))
    assert told()["onsale.line_emptied"] == 1
    assert events_with_work(now) == []


def test_a_start_made_by_a_join_is_told_by_the_next_tick(hears_all, make_event) -> None:
    now = timezone.now()
    event = make_event(starts_at=now + timedelta(minutes=5))
    Event.objects.filter(pk=event.pk).update(starts_at=now - timedelta(seconds=1))
    join(new_fan(), event.slug)
    assert Event.objects.get(pk=event.pk).started_at is not None  # the join started it
    assert told()["onsale.started"] == 0
    event_beat(event_id=event.id, now=now)
    event_beat(event_id=event.id, now=now + timedelta(seconds=1))
    assert told()["onsale.started"] == 1
    assert body_of("onsale.started")["data"] == {"prequeue": 0, "shuffled": True}


def test_an_endpoint_registered_after_the_start_hears_no_old_start(make_event) -> None:
    event = make_event()
    join(new_fan(), event.slug)
    endpoint_create(url="https://hooks.example.com/", types=ALL, actor="x", now=timezone.now())
    event_beat(event_id=event.id, now=timezone.now())
    assert told()["onsale.started"] == 0
