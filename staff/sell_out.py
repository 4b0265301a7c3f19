"""Selling out: the shop (with the on-sale's integration key) or staff say the stock is gone.

The on-sale closes at that moment, for good, as staff's close does (``control`` closed,
``closed_at``), and also records when it sold out and staff's word for the fans. The trail
gets one ``event_sold_out`` record (the message and who said it). The line itself is revoked
by the room's tick as after any close (queueing/line/schedule.py, ``line_revoke_closed``),
each ``revoked`` record with the reason ``sold_out``; fans already in the shop keep their
session and their pass. The fans' pages are sent a tick at once (after the commit), not at
the next beat, so that every waiting and pre-queue page turns to "Sold out" within a second.

Idempotent: selling out what is already sold out answers the on-sale as it stands, with no
second record (the first word stands). An on-sale closed otherwise (by staff, or past its
end) is refused with ``event_closed``: it did not sell out, and saying so later would rewrite
why its line was sent home."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from events.models import MESSAGE_MAX_LENGTH, Event, EventControl, EventState
from queueing.models import AuditAction
from queueing.records.audit import audit_append
from queueing.rules.errors import EventClosed, InvalidInput
from queueing.webhooks.emitting import webhook_emit
from staff.services import after_commit_broadcast

ALREADY_CLOSED = "This on-sale was closed before it sold out: it can no longer be marked sold out."


def sold_out_message_clean(message: str | None) -> str:
    """Staff's word under "Sold out": plain text, trimmed, at most ``MESSAGE_MAX_LENGTH``."""
    text = (message or "").strip()
    if len(text) > MESSAGE_MAX_LENGTH:
        raise InvalidInput(
            f"message is {len(text):,} characters long: at most {MESSAGE_MAX_LENGTH} fit on "
            "the fans' pages."
        )
    return text


def event_sell_out(*, event: Event, message: str | None, actor: str, now: datetime) -> Event:
    """Mark the on-sale sold out (module docstring); the on-sale as it is afterwards.

    ``actor``: ``shop`` for the shop's call, ``staff:<username>`` for staff's."""
    text = sold_out_message_clean(message)
    with transaction.atomic():
        # Locked as staff's controls and changes lock it: a close or a change at the same
        # moment goes first or after, never in between.
        locked = Event.objects.select_for_update(no_key=True).get(pk=event.pk)
        if locked.sold_out_at is not None:
            return locked
        if locked.state_at(now) == EventState.CLOSED:
            raise EventClosed(ALREADY_CLOSED)
        locked.sold_out_at = now
        locked.sold_out_message = text
        locked.control = EventControl.CLOSED
        locked.closed_at = now
        locked.save(
            update_fields=["sold_out_at", "sold_out_message", "control", "closed_at", "updated_at"]
        )
        audit_append(
            event_id=locked.pk,
            action=AuditAction.EVENT_SOLD_OUT,
            actor=actor,
            at=now,
            data={"message": text or None, "by": "shop" if actor == "shop" else "staff"},
        )
        after_commit_broadcast(locked.pk)
        webhook_emit(
            event=locked,
            type="onsale.sold_out",
            now=now,
            data={"message": text or None, "by": "shop" if actor == "shop" else actor},
        )
    return locked
