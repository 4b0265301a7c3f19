"""The room's side of a rehearsal, through its database: the on-sale a scenario runs on, the
staff token its live controls use, and afterwards what the room recorded of every fan."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from events.models import Event
from queueing.models import QueueEntry
from queueing.rules.ticket_codec import InvalidTicket, ticket_read
from rehearsal.scenarios import Scenario
from staff.api_tokens import staff_token_create
from staff.models import TokenScope
from staff.services import TierSpec, event_create

STAFF_USERNAME = "rehearsal"
# Joins before the start: time enough for the whole pre-queue cohort to come in.
PREQUEUE_JOINS_PER_SECOND = 150.0


@dataclass(frozen=True)
class RehearsalSale:
    slug: str
    event_id: int
    integration_key: str


def staff_token() -> str:
    user, _ = get_user_model().objects.get_or_create(
        username=STAFF_USERNAME, defaults={"is_staff": True, "is_superuser": True}
    )
    # A day is more than any rehearsal lasts; the token is the run's own.
    return staff_token_create(
        user=user, scope=TokenScope.CONTROL, days=1, label="rehearsal", now=timezone.now()
    ).plain


def sale_create(scenario: Scenario, *, now: datetime | None = None) -> RehearsalSale:
    now = now or timezone.now()
    slug = f"rehearse-{scenario.name}-{secrets.token_hex(3)}"
    schedule: dict[str, object] = {}
    if scenario.prequeue_fans:
        gather = 5 + scenario.prequeue_fans / PREQUEUE_JOINS_PER_SECOND
        schedule = {
            "prequeue_opens_at": now,
            "starts_at": now + timedelta(seconds=gather),
            "shuffle_at_start": True,
        }
    event = event_create(
        actor="rehearsal",
        now=now,
        slug=slug,
        name=scenario.title[:200],
        target_url="https://shop.example/",
        tiers=[
            TierSpec(
                name=t.name,
                priority=t.priority,
                share=t.share,
                access_codes=[t.code] if t.code else [],
            )
            for t in scenario.tiers
        ],
        capacity=scenario.capacity,
        rate_per_minute=scenario.rate_per_minute,
        session_seconds=scenario.session_seconds,
        heartbeat_seconds=scenario.heartbeat_seconds,
        **schedule,
    )
    return RehearsalSale(slug=slug, event_id=event.pk, integration_key=event.integration_key)


def line_started_wait(event_id: int, *, timeout: float) -> datetime:
    """Until the room's beat has started the line (and shuffled any pre-queue)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = Event.objects.filter(pk=event_id).values_list("started_at", flat=True).first()
        if started is not None:
            return started
        time.sleep(0.1)
    raise TimeoutError(f"the line of on-sale {event_id} did not start in {timeout} s")


@dataclass(frozen=True)
class EntryFacts:
    admitted_at: float | None
    order_key: int
    status: str


def entry_facts(tickets: Iterable[str]) -> dict[str, EntryFacts]:
    """What the room recorded for each ticket: admission time and place in the order."""
    ids: dict[int, str] = {}
    for ticket in tickets:
        try:
            ids[ticket_read(ticket).entry_id] = ticket
        except InvalidTicket:
            continue
    rows = QueueEntry.objects.filter(pk__in=list(ids)).values_list(
        "id", "admitted_at", "order_key", "status"
    )
    return {
        ids[entry_id]: EntryFacts(
            admitted_at=admitted_at.timestamp() if admitted_at else None,
            order_key=order_key,
            status=status,
        )
        for entry_id, admitted_at, order_key, status in rows
    }
