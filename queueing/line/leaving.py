"""A fan leaves the line (or gives their shop slot back)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from queueing.line.index_sync import index_forget
from queueing.models import AuditAction, QueueEntry
from queueing.records.transitions import transition_audited
from queueing.rules.errors import TicketContention
from queueing.rules.place_links import ticket_holder_check
from queueing.rules.states import EntryStatus
from queueing.rules.ticket_codec import TicketRef

_LEAVE_OUTCOME: dict[EntryStatus, tuple[EntryStatus, AuditAction]] = {
    EntryStatus.PREQUEUE: (EntryStatus.LEFT, AuditAction.LEFT),
    EntryStatus.WAITING: (EntryStatus.LEFT, AuditAction.LEFT),
    # Leaving after admission gives the slot back.
    EntryStatus.ADMITTED: (EntryStatus.ABANDONED, AuditAction.ABANDONED),
}


def entry_leave(*, ref: TicketRef, now: datetime) -> bool:
    """The fan leaves. True if this call ended the ticket; False if it was already over.
    PlaceMoved for a ticket the place had before it moved to another browser."""
    for _attempt in range(settings.WR_LEAVE_ATTEMPTS):
        entry = QueueEntry.objects.filter(pk=ref.entry_id, event_id=ref.event_id).first()
        if entry is None:
            return False
        ticket_holder_check(ref, entry.holder_key)  # a moved place's old ticket ends nothing
        if entry.status not in _LEAVE_OUTCOME:
            return False
        current = EntryStatus(entry.status)
        new_status, action = _LEAVE_OUTCOME[current]
        moved = transition_audited(
            event_id=entry.event_id,
            ids=[entry.id],
            to=new_status,
            expected=(current,),
            now=now,
            action=action,
            actor="fan",
            data=lambda m: {"from": m.previous},
        )
        if not moved:
            continue  # changed under us (admitted, expired...): look again
        index_forget(entry.event_id, moved)
        return True
    raise TicketContention()
