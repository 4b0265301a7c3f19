"""Going back in line after a shop session that ended without completing
(``POST /api/v1/tickets/{ticket}/reenter``; queueing/line/reentry.py, rules/states.py)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from django_redis import get_redis_connection

from dashboard.reports import event_report
from events.models import Event
from queueing.hot import keys
from queueing.line import reentry
from queueing.line.expiry import queued_expire_unseen, sessions_expire
from queueing.line.reads import event_layout
from queueing.line.reentry import entry_reenter
from queueing.line.sessions import pass_complete
from queueing.models import AdmissionState, AuditRecord, QueueEntry
from queueing.records.audit import audit_chain_verify
from queueing.records.entry_reads import position_counted
from queueing.rules.states import EntryStatus
from queueing.rules.ticket_codec import TicketRef, ticket_issue, ticket_read
from staff.services import TierSpec, event_close
from tests.helpers import entry_of, fans_join, join, new_fan, poll, shop_completes, statuses, tick

pytestmark = pytest.mark.django_db

WINDOW = 300


def reenter(ticket: str) -> Any:
    return Client().post(f"/api/v1/tickets/{ticket}/reenter")


def refused(response: Any, *words: str) -> bool:
    body = response.json()
    return (
        response.status_code == 409
        and body["error"] == "reentry_not_allowed"
        and all(word in body["detail"] for word in words)
    )


def pass_of(ticket: str) -> str:
    body = poll(ticket)
    assert body["status"] == "admitted", body
    return body["pass"]


def expire_pass(event: Event, ticket: str) -> None:
    """The fan's pass runs out (the session ends as ``expired``, reason ``pass_expired``)."""
    QueueEntry.objects.filter(pk=entry_of(ticket).pk).update(
        pass_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert sessions_expire(event_id=event.id, now=timezone.now()) == 1


def shop_abandons(event: Event, ticket: str) -> None:
    response = shop_completes(pass_of(ticket), event.integration_key, "abandoned")
    assert response.status_code == 204


END_SESSION = {"pass_expired": expire_pass, "shop_abandoned": shop_abandons}


@pytest.fixture
def line(make_event) -> tuple[Event, list[str]]:
    """One fan in the shop (the first), two waiting behind."""
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=WINDOW)
    tickets = fans_join(event.slug, 3)
    tick(event)
    assert statuses(tickets) == ["admitted", "waiting", "waiting"]
    pass_of(tickets[0])  # collected: the session is claimed
    return event, tickets


def hot_tier_order(event: Event) -> list[int]:
    """Each tier's fans as the hot index orders them, the lanes' heads merged by order key."""
    layout = event_layout(event.id, fresh=True)
    assert layout is not None
    redis = get_redis_connection("default")
    order = []
    for tier in layout.tiers:
        scored = [
            (score, int(member))
            for lane in range(layout.lanes)
            for member, score in redis.zrange(
                keys.tier_queue(event.id, tier.id, lane), 0, 99, withscores=True
            )
        ]
        order += [member for _, member in sorted(scored)]
    return order


def database_tier_order(event: Event) -> list[int]:
    return list(
        QueueEntry.objects.filter(event=event, status=EntryStatus.WAITING)
        .order_by("tier__priority", "order_key")
        .values_list("id", flat=True)
    )


@pytest.mark.parametrize("how", sorted(END_SESSION))
def test_a_fan_whose_session_ended_goes_back_to_the_front(line, how: str) -> None:
    event, (first, second, third) = line
    old_pass = pass_of(first)
    END_SESSION[how](event, first)
    ended = entry_of(first)
    assert poll(first)["reentry_until"] == (ended.ended_at + timedelta(seconds=WINDOW)).isoformat()

    response = reenter(first)
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["position"], body["reentry_until"]) == ("waiting", 1, None)
    assert body["pass"] is None and body["redirect_url"] is None
    assert response["Cache-Control"] == "no-store" and response["X-Poll-After-Seconds"]
    # Ahead of the fans who waited, and every answer says so.
    assert [poll(t)["position"] for t in (first, second, third)] == [1, 2, 3]
    back = entry_of(first)
    assert back.status == EntryStatus.WAITING and back.reentered_at is not None
    assert back.admitted_at is None and back.ended_at is None and back.pass_expires_at is None
    # Audited in the chain, with the earlier session kept there.
    record = AuditRecord.objects.get(action="reentered")
    assert record.ticket_id == back.public_id and record.actor == "fan"
    assert record.data["from"] == ("expired" if how == "pass_expired" else "abandoned")
    assert record.data["admitted_at"] == ended.admitted_at.isoformat()
    assert audit_chain_verify(event_id=event.id).ok
    # The hot index and PostgreSQL agree on the line.
    assert (
        hot_tier_order(event)
        == database_tier_order(event)
        == [
            back.id,
            entry_of(second).id,
            entry_of(third).id,
        ]
    )
    layout = event_layout(event.id)
    assert position_counted(back, layout.tiers) == 1

    # The shop has room again: the returning fan is let in first, with a new pass; the pass
    # of the session that ended is not theirs any more.
    tick(event)
    assert statuses([first, second, third]) == ["admitted", "waiting", "waiting"]
    new_pass = pass_of(first)
    assert new_pass != old_pass
    verdicts = [
        Client().post("/api/v1/passes/verify", {"pass": p}, content_type="application/json")
        for p in (new_pass, old_pass)
    ]
    assert verdicts[0].json()["valid"] is True
    assert (verdicts[1].json()["valid"], verdicts[1].json()["reason"]) == (False, "revoked")
    # Nor may the shop end the new session with it.
    assert not pass_complete(
        token=old_pass,
        outcome="completed",
        integration_key=event.integration_key,
        now=timezone.now(),
    )
    assert entry_of(first).status == EntryStatus.ADMITTED


@pytest.mark.parametrize("lanes", [1, 4])
def test_the_front_is_the_front_of_the_fans_own_tier(make_event) -> None:
    event = make_event(
        capacity=1,
        rate_per_minute=0,
        heartbeat_seconds=600,
        reentry_seconds=WINDOW,
        tiers=[TierSpec("VIP", priority=1, access_codes=["VIP"]), TierSpec("General")],
    )
    (general,) = fans_join(event.slug, 1)
    tick(event)
    pass_of(general)
    vip = fans_join(event.slug, 1, {"access_code": "VIP"})[0]
    later = fans_join(event.slug, 1)[0]
    expire_pass(event, general)
    assert reenter(general).json()["position"] == 2
    assert [poll(t)["position"] for t in (vip, general, later)] == [1, 2, 3]
    assert hot_tier_order(event) == database_tier_order(event)


@pytest.mark.parametrize("lanes", [1, 4])
def test_two_returning_fans_each_go_to_the_front_and_the_report_stays_fair(make_event) -> None:
    event = make_event(capacity=2, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=60)
    first, second, third = fans_join(event.slug, 3)
    tick(event)
    for ticket in (first, second):
        pass_of(ticket)
        expire_pass(event, ticket)
    assert reenter(first).json()["position"] == 1
    # The front now holds the first fan's own key: the second goes one below it.
    assert reenter(second).json()["position"] == 1
    assert [poll(t)["position"] for t in (second, first, third)] == [1, 2, 3]
    assert entry_of(second).order_key == entry_of(first).order_key - 1
    assert hot_tier_order(event) == database_tier_order(event)
    tick(event)
    for ticket in (first, second):
        pass_of(ticket)
        Client().delete(f"/api/v1/tickets/{ticket}")
    tick(event)
    assert statuses([third]) == ["admitted"]
    # Fairness is judged on each fan's first admission, by the key they were admitted with.
    report = event_report(event)
    assert report["order_inversions"] == 0
    assert report["per_tier"][0]["admitted"] == report["admitted"] == 3
    assert report["abandonment_rate"] == 0


# Refusals: each one 409 reentry_not_allowed with a sentence that says why.


def test_a_completed_session_cannot_go_back(line) -> None:
    event, (first, *_) = line
    assert pass_complete(
        token=pass_of(first),
        outcome="completed",
        integration_key=event.integration_key,
        now=timezone.now(),
    )
    assert poll(first)["reentry_until"] is None
    assert refused(reenter(first), "completed")


def test_the_window_closes(line) -> None:
    event, (first, *_) = line
    expire_pass(event, first)
    QueueEntry.objects.filter(pk=entry_of(first).pk).update(
        ended_at=timezone.now() - timedelta(seconds=WINDOW + 1)
    )
    assert poll(first)["reentry_until"] is None
    assert refused(reenter(first), "passed")
    assert entry_of(first).status == EntryStatus.EXPIRED


@pytest.mark.parametrize("lanes", [1, 4])
def test_re_entry_is_off_when_the_window_is_zero(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600)
    assert event.reentry_seconds == 0
    (ticket,) = fans_join(event.slug, 1)
    tick(event)
    pass_of(ticket)
    expire_pass(event, ticket)
    assert poll(ticket)["reentry_until"] is None
    assert refused(reenter(ticket), "does not let")


def test_a_ticket_goes_back_once_only(line) -> None:
    event, (first, *_) = line
    expire_pass(event, first)
    assert reenter(first).status_code == 200
    tick(event)
    pass_of(first)
    expire_pass(event, first)
    assert poll(first)["reentry_until"] is None
    assert refused(reenter(first), "already", "once")
    assert AuditRecord.objects.filter(action="reentered").count() == 1


def test_fans_never_admitted_cannot_go_back(line) -> None:
    event, (_first, second, third) = line
    assert refused(reenter(second), "still in line")
    Client().delete(f"/api/v1/tickets/{second}")
    assert refused(reenter(second), "Only a fan whose time in the shop ran out")
    # The third fan's page went away: their place expired while waiting.
    assert queued_expire_unseen(event_id=event.id, now=timezone.now() + timedelta(hours=1)) == 1
    assert statuses([third]) == ["expired"]
    assert poll(third)["reentry_until"] is None
    assert refused(reenter(third), "Only a fan whose time in the shop ran out")
    assert not AuditRecord.objects.filter(action="reentered").exists()


def test_an_admitted_fan_cannot_go_back_in_line(line) -> None:
    _event, (first, *_) = line
    assert refused(reenter(first), "still in line or in the shop")


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_fan_holding_another_place_cannot_go_back_with_this_one(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=60)
    fan = new_fan()
    ticket = join(fan, event.slug).json()["ticket"]
    tick(event)
    pass_of(ticket)
    expire_pass(event, ticket)
    again = join(fan, event.slug)  # "Join the line again": a new ticket for the same fan
    assert again.status_code == 201
    assert refused(reenter(ticket), "another place")
    assert entry_of(ticket).status == EntryStatus.EXPIRED


@pytest.mark.parametrize("lanes", [1, 4])
def test_the_database_has_the_last_word_on_one_place_per_fan(make_event, monkeypatch) -> None:
    """Should the check under the lock ever miss the other place, the unique index refuses
    the UPDATE: still 409, never a 500."""
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=60)
    fan = new_fan()
    ticket = join(fan, event.slug).json()["ticket"]
    tick(event)
    pass_of(ticket)
    expire_pass(event, ticket)
    assert join(fan, event.slug).status_code == 201
    monkeypatch.setattr(reentry, "live_entries", lambda *args: {})
    assert refused(reenter(ticket), "another place")


@pytest.mark.parametrize("lanes", [1, 4])
def test_the_address_cap_holds_for_returning_fans(make_event) -> None:
    event = make_event(
        capacity=1,
        rate_per_minute=0,
        heartbeat_seconds=600,
        reentry_seconds=60,
        max_live_per_address=1,
    )
    (ticket,) = fans_join(event.slug, 1)
    tick(event)
    pass_of(ticket)
    expire_pass(event, ticket)
    fans_join(event.slug, 1)  # another fan from the same address takes the one place
    assert refused(reenter(ticket), "network address")


def test_a_closed_on_sale_takes_nobody_back(line) -> None:
    event, (first, *_) = line
    expire_pass(event, first)
    event_close(event=event, actor="test", now=timezone.now())
    assert poll(first)["reentry_until"] is None
    assert refused(reenter(first), "ended")


@pytest.mark.parametrize("lanes", [1, 4])
def test_bad_tickets_get_the_ticket_endpoints_answers(make_event) -> None:
    event = make_event()
    client = Client()
    response = client.post("/api/v1/tickets/not-a-ticket/reenter")
    assert response.status_code == 400 and response.json()["error"] == "invalid_ticket"
    (ticket,) = fans_join(event.slug, 1)
    ref = ticket_read(ticket)
    gone = ticket_issue(TicketRef(entry_id=ref.entry_id + 1000, event_id=ref.event_id, tier_id=1))
    response = client.post(f"/api/v1/tickets/{gone}/reenter")
    assert response.status_code == 404 and response.json()["error"] == "ticket_not_found"
    response = client.get(f"/api/v1/tickets/{ticket}/reenter")
    assert response.status_code == 405 and response["Allow"] == "POST"


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_returning_fans_first_admission_still_counts_in_the_rate_window(make_event) -> None:
    """The re-entry clears ``admitted_at`` (queued means not admitted); the window reads the
    earlier admission from the trail, so no 60 s ever hold more than the rate."""
    event = make_event(capacity=0, rate_per_minute=60, heartbeat_seconds=3600, reentry_seconds=60)
    tickets = fans_join(event.slug, 70)
    start = timezone.now()
    tick(event, start - timedelta(seconds=120))  # starts the line; admits one
    # A full burst's credit at the start of the window (3 s of the pace).
    AdmissionState.objects.filter(event=event).update(tokens=3.0, refilled_at=start)
    QueueEntry.objects.filter(status=EntryStatus.ADMITTED).update(
        status=EntryStatus.COMPLETED, ended_at=start - timedelta(seconds=100)
    )
    for second in range(60):
        now = start + timedelta(seconds=second)
        tick(event, now)
        if second == 1:
            # The first fan of this window ends up abandoned and comes straight back.
            returning = next(t for t in tickets if entry_of(t).status == EntryStatus.ADMITTED)
            pass_complete(
                token=pass_of(returning),
                outcome="abandoned",
                integration_key=event.integration_key,
                now=now,
            )
            entry_reenter(ref=ticket_read(returning), now=now)
    in_window = AuditRecord.objects.filter(
        event=event, action="admitted", at__gte=start, at__lt=start + timedelta(seconds=60)
    ).count()
    assert in_window == 60


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("lanes", [1, 4])
def test_two_reentries_at_once_go_back_once(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=600, reentry_seconds=60)
    first, _second = fans_join(event.slug, 2)
    tick(event)
    pass_of(first)
    expire_pass(event, first)
    start = threading.Barrier(2)
    answers: list[int] = []

    def go() -> None:
        try:
            start.wait()
            answers.append(reenter(first).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=go) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [200, 409]
    assert AuditRecord.objects.filter(action="reentered").count() == 1
    assert poll(first)["position"] == 1
    assert audit_chain_verify(event_id=event.id).ok
