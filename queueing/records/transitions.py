"""Compare-and-set status changes: one conditional UPDATE that reports the rows it moved.

Only rows still in an expected status move, so two processes racing on the same entries can
never both move one (no double admission, no double expiry); the caller audits exactly the
rows returned, in the same transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from queueing.models import AuditAction, QueueEntry
from queueing.records.audit import AuditItem, audit_append_many
from queueing.rules.states import LIVE, REENTERABLE, EntryStatus, sources_of


@dataclass(frozen=True)
class Moved:
    id: int
    public_id: uuid.UUID
    event_id: int
    tier_id: int
    order_key: int
    previous: EntryStatus
    lane: int = 0
    # The X-Request-ID of the join that made the entry, for the admission run's log.
    join_request_id: str | None = None


_EXTRA_COLUMNS = frozenset({"admitted_at", "pass_expires_at", "order_key"})


def ending_assignments(to: EntryStatus, now: datetime) -> tuple[list[str], list[object]]:
    """The ``SET`` clauses (and their parameters) of a move to ``to``: shared with the bulk
    ends (records/bulk_ends.py), so that both clear what an ended ticket must not keep."""
    assignments = ["status = %s", "status_changed_at = %s"]
    params: list[object] = [to.value, now]
    if to not in LIVE:
        assignments.append("ended_at = %s")
        params.append(now)
        # The fan's e-mail address was left for this ticket only: it goes with it.
        assignments.append("notify_email = ''")
        # So does the digest of the address they joined from (it bounds the live places per
        # address), unless the ticket may still go back in line: a fan let in whose session
        # ended this way, who has not gone back yet (rules/states.py, REENTERABLE). Their
        # return takes a live place again and is counted against it (line/reentry.py); the
        # retention run erases it once the on-sale's re-entry window has passed.
        if to in REENTERABLE:
            assignments.append(
                "address = CASE WHEN admitted_at IS NOT NULL AND reentered_at IS NULL"
                " THEN address END"
            )
        else:
            assignments.append("address = NULL")
    return assignments, params


def transition_many(
    *,
    ids: Sequence[int],
    to: EntryStatus,
    expected: Sequence[EntryStatus],
    now: datetime,
    extra: dict[str, object] | None = None,
    only_unclaimed: bool = False,
) -> list[Moved]:
    """``only_unclaimed``: also require that no pass was handed out (checked in the UPDATE,
    so a fan collecting the pass at that instant keeps the slot)."""
    if not ids:
        return []
    allowed = [s.value for s in expected if s in sources_of(to)]
    if not allowed:
        raise ValueError(f"no transition to {to} from {list(expected)}")
    extra = extra or {}
    unknown = set(extra) - _EXTRA_COLUMNS
    if unknown:
        raise ValueError(f"cannot set {sorted(unknown)} in a transition")
    assignments, params = ending_assignments(to, now)
    for column, value in extra.items():
        assignments.append(f"{column} = %s")
        params.append(value)
    table = QueueEntry._meta.db_table
    # The sub-select reads the status before the update, for the audit record's "from".
    sql = (
        f"UPDATE {table} AS e SET {', '.join(assignments)} "
        f"FROM (SELECT id, status FROM {table} WHERE id = ANY(%s) AND status = ANY(%s) "
        f"{'AND pass_issued_at IS NULL ' if only_unclaimed else ''}"
        f"FOR UPDATE) AS before "
        f"WHERE e.id = before.id "
        f"RETURNING e.id, e.public_id, e.event_id, e.tier_id, e.order_key, before.status, "
        f"e.lane, e.join_request_id"
    )
    params.extend([list(ids), allowed])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        Moved(
            id=row[0],
            public_id=row[1],
            event_id=row[2],
            tier_id=row[3],
            order_key=row[4],
            previous=EntryStatus(row[5]),
            lane=row[6],
            join_request_id=row[7],
        )
        for row in rows
    ]


def transition_audited(
    *,
    event_id: int,
    ids: Sequence[int],
    to: EntryStatus,
    expected: Sequence[EntryStatus],
    now: datetime,
    action: AuditAction,
    actor: str,
    data: Callable[[Moved], dict[str, Any]],
    only_unclaimed: bool = False,
) -> list[Moved]:
    """Move entries and audit exactly those that moved, in one transaction."""
    with transaction.atomic():
        moved = transition_many(
            ids=ids, to=to, expected=expected, now=now, only_unclaimed=only_unclaimed
        )
        audit_append_many(
            event_id=event_id,
            actor=actor,
            at=now,
            items=[AuditItem(action=action, ticket_id=m.public_id, data=data(m)) for m in moved],
        )
    return moved
