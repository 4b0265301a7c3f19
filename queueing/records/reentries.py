"""Re-entry in PostgreSQL: the compare-and-set that puts an ended session back in line, the
front of a tier, and the earlier admissions that re-entries took out of ``admitted_at``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Min

from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.rules.states import REENTERABLE, REENTRY_TO, EntryStatus

# The key, in a ``reentered`` record's data, of the time the fan's earlier session was admitted:
# the entry's own ``admitted_at`` is cleared while it waits again ("queued means not admitted").
FIRST_ADMITTED_AT = "admitted_at"


@dataclass(frozen=True)
class Reentered:
    id: int
    public_id: uuid.UUID
    tier_id: int
    order_key: int


def entry_reenter_cas(
    *, entry_id: int, order_key: int, ended_after: datetime, now: datetime
) -> Reentered | None:
    """Move an ended, once-admitted entry back to waiting with ``order_key``; None when it is
    no longer one (another request re-entered it first, or its window closed).

    One conditional UPDATE: the session's admission and pass are cleared (the database's
    "queued means not admitted" and "ended exactly when terminal"), ``reentered_at`` is set
    so that it happens once."""
    table = QueueEntry._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = %s, status_changed_at = %s, ended_at = NULL, "
            "admitted_at = NULL, pass_expires_at = NULL, pass_issued_at = NULL, "
            "reentered_at = %s, order_key = %s "
            "WHERE id = %s AND status = ANY(%s) AND admitted_at IS NOT NULL "
            "AND reentered_at IS NULL AND ended_at > %s "
            "RETURNING id, public_id, tier_id, order_key",
            [
                REENTRY_TO.value,
                now,
                now,
                order_key,
                entry_id,
                [s.value for s in REENTERABLE],
                ended_after,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return Reentered(id=row[0], public_id=row[1], tier_id=row[2], order_key=row[3])


def tier_smallest_waiting_key(*, event_id: int, tier_id: int) -> int | None:
    """The order key at the front of a tier's line (index entry_waiting_order)."""
    return QueueEntry.objects.filter(
        event_id=event_id, tier_id=tier_id, status=EntryStatus.WAITING
    ).aggregate(smallest=Min("order_key"))["smallest"]


def earlier_admissions_since(*, event_id: int, since: datetime) -> int:
    """Admissions after ``since`` of sessions that a re-entry has since cleared from their
    entry's ``admitted_at``: the rate window must still count them. Read from the
    ``reentered`` records (index audit_event_action_at), which keep that time; a re-entry
    comes after its admission, so only records after ``since`` can hold one."""
    count = 0
    for data in AuditRecord.objects.filter(
        event_id=event_id, action=AuditAction.REENTERED, at__gt=since
    ).values_list("data", flat=True):
        first = data.get(FIRST_ADMITTED_AT) if isinstance(data, dict) else None
        if first is not None and datetime.fromisoformat(first) > since:
            count += 1
    return count
