"""Selling out (staff/sell_out.py): the on-sale closes at once with a record of who said so,
a second call changes nothing, an on-sale closed otherwise is refused, the line is revoked
with the reason ``sold_out``, joins are refused as sold out, and fans in the shop keep their
session (the gate still lets them in)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from events.models import MESSAGE_MAX_LENGTH, EventControl
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_event_verify
from queueing.rules.errors import EventClosed, InvalidInput
from staff.sell_out import event_sell_out
from staff.services import event_close
from tests.helpers import fans_join, join, new_fan, poll, tick, waiting_entries

pytestmark = pytest.mark.django_db


def gate_check(slug: str, pass_token: str) -> int:
    """The shop's web server asking whether this fan, arriving with their pass, may in."""
    return (
        Client()
        .get(
            f"/gate/{slug}/check",
            headers={
                "X-Original-URI": f"/checkout?wr_pass={pass_token}",
                "X-Original-Host": "shop.example",
                "X-Original-Proto": "https",
            },
        )
        .status_code
    )


def sold_out_records(event: Any) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(event=event, action=AuditAction.EVENT_SOLD_OUT))


def test_it_closes_at_once_with_one_record_and_a_second_call_changes_nothing(
    make_event, django_capture_on_commit_callbacks
) -> None:
    event = make_event(slug="gig")
    now = timezone.now()
    with django_capture_on_commit_callbacks() as after_commit:
        sold = event_sell_out(event=event, message="  All gone, thanks!  ", actor="shop", now=now)
    assert len(after_commit) == 1  # the pages' tick, asked for once committed
    assert sold.sold_out_at == now and sold.closed_at == now
    assert sold.control == EventControl.CLOSED
    assert sold.sold_out_message == "All gone, thanks!"
    (record,) = sold_out_records(event)
    assert record.actor == "shop" and record.at == now
    assert record.data == {"message": "All gone, thanks!", "by": "shop"}

    later = timezone.now()
    with django_capture_on_commit_callbacks() as again:
        same = event_sell_out(event=event, message="Something else", actor="staff:ann", now=later)
    assert again == []
    assert (same.sold_out_at, same.sold_out_message) == (now, "All gone, thanks!")
    assert len(sold_out_records(event)) == 1
    assert audit_event_verify(event_id=event.id).ok


def test_staff_saying_it_is_recorded_as_staff_without_a_message(make_event) -> None:
    event = make_event(slug="gig")
    sold = event_sell_out(event=event, message=None, actor="staff:ann", now=timezone.now())
    assert sold.sold_out_message == ""
    (record,) = sold_out_records(event)
    assert record.actor == "staff:ann" and record.data == {"message": None, "by": "staff"}


def test_an_on_sale_closed_otherwise_is_refused_and_a_long_message_too(make_event) -> None:
    closed = make_event(slug="closed")
    event_close(event=closed, actor="test", now=timezone.now())
    with pytest.raises(EventClosed) as refused:
        event_sell_out(event=closed, message="", actor="shop", now=timezone.now())
    assert refused.value.code == "event_closed"
    open_ = make_event(slug="open")
    with pytest.raises(InvalidInput):
        event_sell_out(
            event=open_, message="x" * (MESSAGE_MAX_LENGTH + 1), actor="shop", now=timezone.now()
        )
    for event in (closed, open_):
        event.refresh_from_db()
        assert event.sold_out_at is None and sold_out_records(event) == []
    assert open_.control == EventControl.RUNNING


def test_the_line_is_revoked_as_sold_out_and_fans_in_the_shop_keep_their_session(
    make_event, settings
) -> None:
    # Polls read the on-sale from the process's cached layout (2 s): as it is now, here.
    settings.WR_LAYOUT_CACHE_SECONDS = 0
    event = make_event(slug="gig", capacity=2, rate_per_minute=0)
    inside = fans_join(event.slug, 2)
    tick(event)  # both go in: the capacity
    passes = [poll(ticket)["pass"] for ticket in inside]
    assert all(passes)
    waiting = fans_join(event.slug, 3)
    waiting_entries(event, event.tiers.get(), 5, prefix="far")

    event_sell_out(event=event, message="Gone", actor="shop", now=timezone.now())
    tick(event)

    assert QueueEntry.objects.filter(event=event, status="revoked").count() == 8
    revoked = AuditRecord.objects.filter(event=event, action=AuditAction.REVOKED)
    assert revoked.count() == 8
    assert {record.data["reason"] for record in revoked} == {"sold_out"}
    assert [poll(ticket)["status"] for ticket in waiting] == ["revoked"] * 3
    # Those in the shop: still admitted, their passes still open the shop's door.
    assert [poll(ticket)["status"] for ticket in inside] == ["admitted"] * 2
    assert [gate_check(event.slug, token) for token in passes] == [204, 204]
    # The poll says sold out, for the page to say so.
    assert poll(waiting[0])["sold_out_at"] is not None
    assert poll(waiting[0])["sold_out_message"] == "Gone"


def test_a_plain_close_still_gives_the_reason_closed(make_event) -> None:
    event = make_event(slug="gig", capacity=0, rate_per_minute=1)
    fans_join(event.slug, 2)
    event_close(event=event, actor="test", now=timezone.now())
    tick(event)
    revoked = AuditRecord.objects.filter(event=event, action=AuditAction.REVOKED)
    assert {record.data["reason"] for record in revoked} == {"closed"}


def test_joins_are_refused_as_sold_out(make_event) -> None:
    event = make_event(slug="gig")
    event_sell_out(event=event, message="", actor="shop", now=timezone.now())
    reply = join(new_fan(), event.slug)
    assert reply.status_code == 409
    assert reply.json() == {"error": "event_sold_out", "detail": "This on-sale is sold out."}
