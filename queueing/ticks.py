"""One beat of the room for one event: schedule, expiry, admission, in that order."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from events.models import Event, EventControl, EventState
from queueing.line.admission import AdmissionOutcome, admission_run
from queueing.line.expiry import queued_expire_unseen, sessions_expire
from queueing.line.index_sync import index_heal_head
from queueing.line.schedule import line_admit_stragglers, line_revoke_closed, line_start
from queueing.live.ticks import broadcast_tick
from queueing.models import QueueEntry
from queueing.rules.states import LIVE

logger = logging.getLogger(__name__)


def events_needing_ticks() -> list[int]:
    """Events not closed, and closed ones that still have fans to end."""
    has_live = Exists(QueueEntry.objects.filter(event=OuterRef("pk"), status__in=LIVE))
    return list(
        Event.objects.filter(~Q(control=EventControl.CLOSED) | has_live).values_list(
            "id", flat=True
        )
    )


def event_tick(*, event_id: int, now: datetime) -> AdmissionOutcome | None:
    event = Event.objects.filter(pk=event_id).first()
    if event is None:
        return None
    state = event.state_at(now)
    sessions_expire(event_id=event_id, now=now)
    if state == EventState.CLOSED:
        line_revoke_closed(event_id=event_id, now=now)
        return None
    if state in (EventState.OPEN, EventState.PAUSED):
        if event.started_at is None:
            line_start(event_id=event_id, now=now)
        else:
            line_admit_stragglers(event_id=event_id, now=now)
    queued_expire_unseen(event_id=event_id, now=now)
    index_heal_head(event_id=event_id)
    if state == EventState.OPEN:
        return admission_run(event_id=event_id, now=now)
    return None


def room_tick(*, clock: Callable[[], datetime]) -> None:
    for event_id in events_needing_ticks():
        # Each event reads the clock itself: a slow event must not age the next one's time.
        now = clock()
        # One event's failure must not stop the others' ticks.
        try:
            event_tick(event_id=event_id, now=now)
            broadcast_tick(event_id=event_id, now=now)
        except Exception:
            logger.exception("tick of event %s failed", event_id)
