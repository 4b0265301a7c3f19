"""Away, not gone (queueing/line/away.py): a fan whose page was not seen for the heartbeat
window keeps the place for ``away_seconds`` more; admission passes them over (no shop slot),
and back they go in first in their tier. Heartbeats are aged in the hot index itself, as a
page that stopped asking leaves them."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.reports import event_report
from events.models import Event
from queueing.hot import line_index
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit import audit_chain_verify
from tests.helpers import entry_of, fans_join, poll, shop_completes, statuses, tick

pytestmark = pytest.mark.django_db


def unseen_for(event: Event, ticket: str, seconds: float) -> None:
    """The fan's page has not asked for ``seconds`` past its heartbeat deadline."""
    entry = entry_of(ticket)
    line_index.refresh_heartbeats(
        event.id, [entry.id], deadline=time.time() - seconds, lane=entry.lane
    )


def actions(event: Event, ticket: str) -> list[str]:
    public_id = entry_of(ticket).public_id
    return list(
        AuditRecord.objects.filter(event=event, ticket_id=public_id)
        .order_by("seq")
        .values_list("action", flat=True)
    )


@pytest.fixture
def sale(make_event) -> Event:
    # No pace: capacity alone decides, so a tick lets in exactly the free slots.
    return make_event(capacity=2, rate_per_minute=0, heartbeat_seconds=30, away_seconds=600)


def test_an_away_fan_at_their_turn_is_passed_over_and_holds_no_slot(sale: Event) -> None:
    first, second, third, fourth = fans_join(sale.slug, 4)
    unseen_for(sale, first, 5)
    tick(sale)
    assert statuses([first, second, third, fourth]) == [
        "waiting",
        "admitted",
        "admitted",
        "waiting",
    ]
    assert entry_of(first).passed_over_at is not None
    assert actions(sale, first) == ["joined", "away"]
    # Nobody counts the passed fan ahead of them any more.
    behind = poll(fourth)
    assert (behind["position"], behind["queue_length"]) == (1, 1)


def test_back_after_the_turn_goes_in_first_in_the_tier(sale: Event) -> None:
    first, second, _third, fourth = fans_join(sale.slug, 4)
    unseen_for(sale, first, 5)
    tick(sale)
    came_back = poll(first)  # the page wakes up: any answer about the ticket brings it back
    assert (came_back["status"], came_back["position"]) == ("waiting", 1)
    assert entry_of(first).passed_over_at is None
    assert actions(sale, first) == ["joined", "away", "back"]
    assert poll(fourth)["position"] == 2
    # A slot frees: the fan who came back goes in, not the one who was behind them.
    shop_completes(poll(second)["pass"], sale.integration_key)
    tick(sale)
    assert statuses([first, fourth]) == ["admitted", "waiting"]
    report = event_report(sale)
    assert (report["passed_over_away"], report["came_back_after_turn"]) == (1, 1)
    # Let in after two who were behind: by the away rule, not counted against the order.
    assert report["order_inversions"] == 0
    assert audit_chain_verify(event_id=sale.id).ok


def test_an_away_fan_keeps_the_place_before_the_turn_and_is_counted(sale: Event) -> None:
    tickets = fans_join(sale.slug, 5)
    tick(sale)  # two in the shop, three waiting
    away = tickets[3]
    unseen_for(sale, away, 300)  # away for five minutes, before their turn
    tick(sale)
    assert entry_of(away).status == "waiting"
    assert poll(tickets[4])["position"] == 3  # the away fan still counts ahead
    assert poll(away)["position"] == 2  # and is where they were when back


def test_the_place_ends_only_when_the_hold_is_over(sale: Event) -> None:
    tickets = fans_join(sale.slug, 4)
    tick(sale)
    unseen_for(sale, tickets[2], 590)
    tick(sale)
    assert entry_of(tickets[2]).status == "waiting"
    unseen_for(sale, tickets[2], 601)
    tick(sale)
    assert entry_of(tickets[2]).status == "expired"
    record = AuditRecord.objects.filter(event=sale, action="expired").get()
    assert record.data["reason"] == "no_heartbeat"


def test_a_passed_fan_who_never_comes_back_expires_away_seconds_after_the_turn(
    sale: Event,
) -> None:
    first, *_ = fans_join(sale.slug, 3)
    unseen_for(sale, first, 5)
    tick(sale)
    passed_at = entry_of(first).passed_over_at
    assert passed_at is not None
    tick(sale, now=passed_at + timedelta(seconds=599))
    assert entry_of(first).status == "waiting"
    tick(sale, now=passed_at + timedelta(seconds=601))
    entry = entry_of(first)
    assert entry.status == "expired"
    assert actions(sale, first) == ["joined", "away", "expired"]
    # Ended is ended: asking again does not bring the place back.
    assert poll(first)["status"] == "expired"


@pytest.mark.parametrize("lanes", [1, 4])
def test_with_no_hold_an_away_fan_at_their_turn_expires_as_before(make_event) -> None:
    sale = make_event(capacity=1, rate_per_minute=0, heartbeat_seconds=30, away_seconds=0)
    first, second = fans_join(sale.slug, 2)
    unseen_for(sale, first, 1)
    tick(sale)
    assert statuses([first, second]) == ["expired", "admitted"]


@pytest.mark.parametrize("lanes", [1, 4])
def test_admission_picks_again_for_the_slots_away_fans_did_not_take(make_event) -> None:
    sale = make_event(capacity=3, rate_per_minute=0, heartbeat_seconds=30, away_seconds=600)
    tickets = fans_join(sale.slug, 7)
    for ticket in tickets[:4]:
        unseen_for(sale, ticket, 5)
    tick(sale)
    assert statuses(tickets) == ["waiting"] * 4 + ["admitted"] * 3
    assert QueueEntry.objects.filter(event=sale, passed_over_at__isnull=False).count() == 4


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_prequeue_place_is_kept_until_the_start(make_event) -> None:
    now = timezone.now()
    sale = make_event(
        capacity=2,
        rate_per_minute=0,
        heartbeat_seconds=30,
        away_seconds=60,
        prequeue_opens_at=now - timedelta(minutes=1),
        starts_at=now + timedelta(hours=1),
    )
    (ticket,) = fans_join(sale.slug, 1)
    unseen_for(sale, ticket, 3_000)  # the phone slept for most of an hour
    tick(sale)
    assert entry_of(ticket).status == "prequeue"
