"""Telling the endpoints that something happened to an on-sale: one delivery row per endpoint
that listens, written in the caller's transaction (so a change undone tells nobody, and one
committed is told exactly once), and its first attempt asked of a worker after the commit.

Nothing here calls anyone: the attempts are the workers' (queueing/webhooks/delivering.py).
It is never called on a fan's join or poll; the moments of the line itself are noticed by the
tick (queueing/line/line_watch.py)."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Any

from celery import current_app
from django.db import transaction
from django.db.models import Q

from events.models import Event
from queueing.models import WebhookDelivery, WebhookEndpoint
from queueing.rules.webhooks import WEBHOOK_TYPES

logger = logging.getLogger(__name__)

# Sent by name: the room's tasks sit above it (queueing/tasks.py declares it).
WEBHOOK_DELIVER = "queueing.tasks.webhook_deliver"


def webhook_body(
    *, delivery_id: uuid.UUID, type: str, event: Event, now: datetime, data: dict[str, Any]
) -> str:
    """The JSON POSTed, fixed once: every attempt sends (and signs) the same bytes."""
    return json.dumps(
        {
            "id": str(delivery_id),
            "type": type,
            "created_at": now.isoformat(),
            "event": {
                "slug": event.slug,
                "name": event.name,
                "state": event.state_at(now).value,
                "mode": event.mode,
            },
            "data": data,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


def webhook_emit(
    *, event: Event, type: str, now: datetime, data: dict[str, Any] | None = None
) -> int:
    """A delivery for every enabled endpoint of ``event`` (or of every on-sale) that hears
    ``type``; how many. Call it in the transaction of the change it tells of."""
    if type not in WEBHOOK_TYPES:
        raise ValueError(f"unknown webhook type {type!r}")
    endpoints = list(
        WebhookEndpoint.objects.filter(enabled=True, types__contains=[type])
        .filter(Q(event__isnull=True) | Q(event_id=event.pk))
        .values_list("id", flat=True)
    )
    if not endpoints:
        return 0
    rows = []
    for endpoint_id in endpoints:
        public_id = uuid.uuid4()
        body = webhook_body(delivery_id=public_id, type=type, event=event, now=now, data=data or {})
        rows.append(
            WebhookDelivery(
                public_id=public_id,
                endpoint_id=endpoint_id,
                type=type,
                body=body,
                due_at=now,
                created_at=now,
            )
        )
    with transaction.atomic():
        created = WebhookDelivery.objects.bulk_create(rows)
        ids = [row.id for row in created]
        transaction.on_commit(lambda: deliveries_ask(ids))
    return len(ids)


def deliveries_ask(ids: list[int], *, expires: float | None = None) -> None:
    """Ask the workers for an attempt of each delivery; the sweep asks again for any lost
    (``expires``: its asks are dropped when the next sweep has asked again)."""
    try:
        for delivery_id in ids:
            current_app.send_task(WEBHOOK_DELIVER, args=(delivery_id,), expires=expires)
    except Exception:  # the broker is away: the sweep finds them due
        logger.warning("could not ask for webhook deliveries %s", ids, exc_info=True)
