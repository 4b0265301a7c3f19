"""What the re-entry rule (queueing/rules/reentry.py) is told about an entry and its on-sale:
read by the ticket's answer (``reentry_until``) and by the re-entry itself."""

from __future__ import annotations

from datetime import datetime

from events.models import Event, EventMode, EventState
from queueing.models import QueueEntry
from queueing.rules.reentry import ReentryFacts
from queueing.rules.states import EntryStatus


def reentry_facts(entry: QueueEntry, event: Event, *, now: datetime) -> ReentryFacts:
    return ReentryFacts(
        status=EntryStatus(entry.status),
        was_admitted=entry.admitted_at is not None,
        ended_at=entry.ended_at,
        reentered_at=entry.reentered_at,
        reentry_seconds=event.reentry_seconds,
        event_closed=event.state_at(now) == EventState.CLOSED,
        event_in_maintenance=event.mode == EventMode.MAINTENANCE,
    )
