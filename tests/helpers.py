from __future__ import annotations

import time

from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from queueing.models import QueueEntry
from queueing.rules.ticket_codec import TicketRef, ticket_issue, ticket_read
from staff.services import event_pause
from tests.conftest import join, new_fan


def fans_join(slug: str, count: int, body: dict | None = None) -> list[str]:
    return [join(new_fan(), slug, body).json()["ticket"] for _ in range(count)]


def entry_of(ticket: str) -> QueueEntry:
    return QueueEntry.objects.get(pk=ticket_read(ticket).entry_id)


def statuses(tickets: list[str]) -> list[str]:
    return [entry_of(t).status for t in tickets]


def poll(ticket: str) -> dict:
    return Client().get(f"/api/v1/tickets/{ticket}").json()


def waiting_entries(event, tier, count: int, *, prefix: str = "fan") -> None:
    """``count`` waiting fans of ``tier`` written straight to PostgreSQL (no join path, no
    hot index: callers rebuild it when they need it)."""
    now = timezone.now()
    QueueEntry.objects.bulk_create(
        QueueEntry(
            event=event,
            tier=tier,
            identity=f"{prefix}{i}",
            status="waiting",
            joined_at=now,
            status_changed_at=now,
        )
        for i in range(count)
    )


def tickets_in_line_order(event, tier) -> list[str]:
    return [
        ticket_issue(TicketRef(entry_id=entry_id, event_id=event.id, tier_id=tier.id))
        for entry_id in QueueEntry.objects.filter(event=event)
        .order_by("order_key")
        .values_list("id", flat=True)
    ]


def admission_halted(event, *, settle_seconds: float = 1.5, timeout: float = 15) -> None:
    """Pause the on-sale and wait until nobody more is let in (an admission run that read
    the on-sale before the pause may still finish): positions then hold still, so a test
    can read them all and expect an exact line."""
    event_pause(event=event, actor="test", now=timezone.now())
    deadline = time.monotonic() + timeout
    admitted = QueueEntry.objects.filter(event=event, status="admitted").count()
    while time.monotonic() < deadline:
        time.sleep(settle_seconds)
        now_admitted = QueueEntry.objects.filter(event=event, status="admitted").count()
        if now_admitted == admitted:
            return
        admitted = now_admitted
    raise AssertionError(f"admission went on for {timeout}s after the pause")


def staff_token() -> str:
    """A staff member's API token (the staff API's ``Authorization: Token …``)."""
    staff = get_user_model().objects.create_superuser("ann", "ann@example.com", None)
    return Token.objects.create(user=staff).key
