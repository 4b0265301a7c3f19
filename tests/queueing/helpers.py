from __future__ import annotations

from django.test import Client

from queueing.models import QueueEntry
from queueing.rules.tickets import ticket_read
from tests.conftest import join, new_fan


def fans_join(slug: str, count: int, body: dict | None = None) -> list[str]:
    return [join(new_fan(), slug, body).json()["ticket"] for _ in range(count)]


def entry_of(ticket: str) -> QueueEntry:
    return QueueEntry.objects.get(pk=ticket_read(ticket).entry_id)


def statuses(tickets: list[str]) -> list[str]:
    return [entry_of(t).status for t in tickets]


def poll(ticket: str) -> dict:
    return Client().get(f"/api/v1/tickets/{ticket}").json()
