"""The moments of the line itself that endpoints hear of, noticed by the on-sale's tick (never
by a fan's join or poll): the line emptied while open, fans beginning to queue in safety net,
the end of an on-sale passing (its ``ends_at``) while anyone is in the room, and a start that
a fan's join made (line/schedule.py).

What the tick saw last is kept in ``LineWatch``; a moment is told when what it sees now
differs, and the row moves by compare-and-set in the same transaction as the webhook's
deliveries: two ticks at once (a duplicate) tell it once."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from events.models import Event, EventMode, EventState
from queueing.line.schedule import started_data
from queueing.models import LineWatch, QueueEntry
from queueing.rules.states import QUEUED
from queueing.webhooks.emitting import webhook_emit


def line_watch(event: Event, *, now: datetime) -> None:
    """After the tick: tell what changed in the line since the last tick (module docstring)."""
    in_line = QueueEntry.objects.filter(event_id=event.pk, status__in=QUEUED).exists()
    watch, _ = LineWatch.objects.get_or_create(
        event_id=event.pk, defaults={"in_line": False, "seen_at": now}
    )
    state = event.state_at(now)
    if not watch.start_told and event.started_at is not None:
        # A fan's join started the line (line/schedule.py): told here, once. Nobody was in
        # a pre-queue then (the join starts only a line without one).
        with transaction.atomic():
            if LineWatch.objects.filter(pk=event.pk, start_told=False).update(start_told=True):
                webhook_emit(
                    event=event, type="onsale.started", now=now, data=started_data(event, 0)
                )
    if watch.in_line != in_line:
        with transaction.atomic():
            moved = LineWatch.objects.filter(pk=event.pk, in_line=watch.in_line).update(
                in_line=in_line, seen_at=now
            )
            if moved and state in (EventState.OPEN, EventState.PAUSED):
                if not in_line:
                    webhook_emit(event=event, type="onsale.line_emptied", now=now)
                elif event.mode == EventMode.SAFETY_NET and state == EventState.OPEN:
                    webhook_emit(event=event, type="onsale.safety_net_queueing", now=now)
    if state == EventState.CLOSED and event.closed_at is None and not watch.end_told:
        # Closed by its end passing: staff's close and a sell-out were told by their services.
        with transaction.atomic():
            if LineWatch.objects.filter(pk=event.pk, end_told=False).update(end_told=True):
                webhook_emit(
                    event=event,
                    type="onsale.closed",
                    now=now,
                    data={
                        "by": "schedule",
                        "ends_at": event.ends_at.isoformat() if event.ends_at else None,
                    },
                )
