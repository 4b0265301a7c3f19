"""The room's beat: each second, a tick for every on-sale that has something to do.

- ``room_dispatch`` (beat, once a second, one task for the whole room) finds the on-sales with
  work (``line/activity.py``: fans in the room, a start due) and sends each its own tick,
  unless one is still outstanding (``hot/tick_claims.py``), so no backlog builds up; and asks
  for the draws due, if any (``line/draw.py``).
- ``event_beat`` (a worker, one task per on-sale) runs that on-sale's tick: schedule, expiry,
  admission, in that order, then the live broadcast. On-sales tick in parallel on as many
  workers as there are; a slow or failing one delays no other. A duplicate is harmless: the
  admission lock and the compare-and-set transitions make a second run a no-op. Last, for
  an on-sale with lanes, a root record commits to its lanes' heads if they moved
  (``records/audit_roots.py``): a second in which joins went to its lanes gets one root.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from django.conf import settings

from events.models import Event, EventState
from queueing.hot import stats, tick_claims
from queueing.line.activity import events_with_work
from queueing.line.admission import AdmissionOutcome, admission_run
from queueing.line.draw import draws_ask
from queueing.line.expiry import queued_expire_unseen, sessions_expire
from queueing.line.index_sync import index_heal_head
from queueing.line.line_watch import line_watch
from queueing.line.schedule import line_admit_stragglers, line_revoke_closed, line_start
from queueing.live.ticks import event_broadcast
from queueing.records.audit_roots import audit_root_write

logger = logging.getLogger(__name__)


def event_tick(*, event_id: int, now: datetime) -> AdmissionOutcome | None:
    """Schedule, expiry, admission of one on-sale, in that order."""
    event = Event.objects.filter(pk=event_id).first()
    return _event_tick(event, now=now) if event is not None else None


class BulkTime:
    """How long a tick goes on ending fans in bulk (a line revoked, the unseen expired), asked
    between chunks: True while ``seconds`` have not passed, the tick's claim kept meanwhile
    (``keep``) so that the beat sends no second tick; False once the time is up or the claim
    was lost (another tick may be running: the rest is left to it)."""

    def __init__(self, event_id: int, claim: str, *, seconds: float) -> None:
        self.event_id, self.claim = event_id, claim
        self.deadline = time.monotonic() + seconds
        # A chunk under way when the time is up may take as long again on a busy machine.
        self.keep_for = 2 * seconds + settings.WR_TICK_STALE_SECONDS

    def keep(self) -> bool:
        """The claim kept for ``keep_for`` more; False if it was lost."""
        if not self.claim:
            return True
        return tick_claims.tick_extend(self.event_id, self.claim, ttl_seconds=self.keep_for)

    def __call__(self) -> bool:
        return time.monotonic() < self.deadline and self.keep()


def _event_tick(event: Event, *, now: datetime, claim: str = "") -> AdmissionOutcome | None:
    event_id = event.pk
    state = event.state_at(now)
    sessions_expire(event_id=event_id, now=now)
    if state == EventState.CLOSED:
        revoking = BulkTime(event_id, claim, seconds=settings.WR_LINE_END_SECONDS)
        # Kept from the start: a first chunk of a long line outlasts the claim's own expiry.
        revoking.keep()
        line_revoke_closed(
            event_id=event_id,
            now=now,
            go_on=revoking,
            # The trail says why each fan was sent home (staff/sell_out.py).
            reason="sold_out" if event.sold_out_at is not None else "closed",
        )
        return None
    if state in (EventState.OPEN, EventState.PAUSED):
        if event.started_at is None:
            line_start(event_id=event_id, now=now)
        else:
            line_admit_stragglers(event_id=event_id, now=now)
    if event.started_at is not None:
        # A pre-queue place is kept until the start whoever looks at it: the start reloads
        # the index, which gives everyone a fresh heartbeat window (and then the away hold).
        queued_expire_unseen(
            event_id=event_id,
            now=now,
            away_seconds=event.away_seconds,
            go_on=BulkTime(event_id, claim, seconds=settings.WR_EXPIRY_SECONDS),
        )
    index_heal_head(event_id=event_id)
    if state in (EventState.OPEN, EventState.PAUSED):
        # Paused, the run lets nobody in but keeps counting who leaves the shop, which the
        # pace after the pause is measured from (line/admission.py).
        return admission_run(event_id=event_id, now=now)
    return None


def event_beat(*, event_id: int, now: datetime, claim: str = "") -> None:
    """One on-sale's whole tick, then its claim released so that the next can be sent."""
    try:
        # Read once for both halves: the tick changes nothing the broadcast reads of it
        # (its state comes from staff's control and the schedule).
        event = Event.objects.filter(pk=event_id).first()
        if event is None:
            return
        if event.state_at(now) == EventState.CLOSED:
            # Before the line's end, which may take the tick's whole WR_LINE_END_SECONDS:
            # pages learn of the close at once, from this one message.
            event_broadcast(event, now=now)
            _event_tick(event, now=now, claim=claim)
            line_watch(event, now=now)
        else:
            _event_tick(event, now=now, claim=claim)
            event_broadcast(event, now=now)
            # The line's own moments for the webhooks: read once a tick, never per fan.
            line_watch(event, now=now)
            if event.lanes > 1:
                # After the broadcast: the pages are told first, the proof follows.
                audit_root_write(event_id=event_id, now=now)
    except Exception:
        logger.exception("tick of event %s failed", event_id)
    finally:
        if claim:
            tick_claims.tick_release(event_id, claim)


def room_dispatch(
    *, now: datetime, send: Callable[[int, str], None], claim_seconds: float
) -> list[int]:
    """Send a tick to every on-sale with work and none outstanding; returns their ids."""
    event_ids = events_with_work(now)
    # Without Redis every on-sale with work gets a tick (no claims: hot/tick_claims.py),
    # whose expiry drops it if it is not run in time.
    claims = tick_claims.ticks_claim(event_ids, ttl_seconds=claim_seconds)
    for event_id, claim in claims.items():
        send(event_id, claim)
    if claims:
        # waitingroom_ticks_dispatched_total (config/metrics.py): one count a second.
        stats.room_counter_add(stats.TICKS_DISPATCHED, len(claims))
    # Draws due (a registration window closed) and invitations lapsed: one probe for the
    # whole room, a task only when there is work (line/draw.py).
    draws_ask(now)
    return list(claims)
