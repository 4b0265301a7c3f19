"""An ended on-sale's rows as its archive holds them, and their removal once it is written.

The archive (docs/archive-format.md) holds every audit record exactly as the auditors' API
exports it (``audit_row``: the fields the hash covers, in the form hashed), and of each entry
only what the report and an auditor need: its ticket id, tier, lane, order key, status and
times. Never the identity or address digests, the e-mail address or its language, the return
URL or the holder key: what a fan could be told apart or reached by stays out of the file.

The removal goes in batches of ``DELETE_BATCH`` rows, each its own short transaction, so that
no lock is held long and the tables' other on-sales are never waited for.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from queueing.models import (
    AdmissionState,
    AuditChainHead,
    AuditLaneHead,
    AuditRecord,
    Invitation,
    PlaceLink,
    QueueEntry,
)
from queueing.records.audit import hashed_at

DELETE_BATCH = 5000
_READ_CHUNK = 5000


def audit_row(
    *,
    id: int,
    at: datetime,
    slug: str | None,
    event_id: int,
    lane: int | None,
    seq: int,
    ticket_id: uuid.UUID | None,
    action: str,
    actor: str,
    data: Any,
    prev_hash: str,
    hash: str,
) -> dict[str, Any]:
    """One audit record as the auditors' API shows it (docs/api.md, "Auditors")."""
    return {
        "id": id,
        "at": at.isoformat(),
        "event": slug,
        "ticket_id": str(ticket_id) if ticket_id else None,
        "action": action,
        "actor": actor,
        "data": data,
        "hash": hash,
        "prev_hash": prev_hash,
        # What the hash covers and the fields above do not show as hashed: the on-sale's id
        # (``event`` is its slug), the place in the chain, and ``at`` in the hashed form.
        "event_id": event_id,
        "seq": seq,
        "at_hashed": hashed_at(at),
        # The record's chain within the on-sale: null for its root chain (docs/api.md, "Lanes").
        "lane": lane,
    }


_RECORD_COLUMNS = (
    "id",
    "at",
    "event_id",
    "lane",
    "seq",
    "ticket_id",
    "action",
    "actor",
    "data",
    "prev_hash",
    "hash",
)


def trail_rows(*, event_id: int, slug: str) -> Iterator[dict[str, Any]]:
    """Every audit record of the on-sale, in the export's order (row id), a chunk at a time
    from one server-side cursor."""
    rows = (
        AuditRecord.objects.filter(event_id=event_id)
        .order_by("id")
        .values_list(*_RECORD_COLUMNS, named=True)
    )
    for row in rows.iterator(chunk_size=_READ_CHUNK):
        yield audit_row(slug=slug, **row._asdict())


# What the archive keeps of an entry (its line has exactly these keys, sorted as every
# line's are); docs/archive-format.md names each.
ENTRY_KEYS = (
    "ticket_id",
    "tier",
    "lane",
    "order_key",
    "status",
    "joined_at",
    "status_changed_at",
    "admitted_at",
    "pass_issued_at",
    "pass_expires_at",
    "ended_at",
    "reentered_at",
    "passed_over_at",
    "notified_at",
    "quoted_p10",
    "quoted_p50",
    "quoted_p90",
)
_TIMES = frozenset(key for key in ENTRY_KEYS if key.endswith("_at"))
_ENTRY_COLUMNS = tuple(
    {"ticket_id": "public_id", "tier": "tier__name"}.get(key, key) for key in ENTRY_KEYS
)


def entry_rows(*, event_id: int) -> Iterator[dict[str, Any]]:
    """Every entry of the on-sale as the archive keeps it, in row order."""
    rows = QueueEntry.objects.filter(event_id=event_id).order_by("id").values_list(*_ENTRY_COLUMNS)
    for row in rows.iterator(chunk_size=_READ_CHUNK):
        entry = dict(zip(ENTRY_KEYS, row, strict=True))
        entry["ticket_id"] = str(entry["ticket_id"])
        for key in _TIMES:
            if entry[key] is not None:
                entry[key] = hashed_at(entry[key])
        yield entry


@dataclass(frozen=True)
class Heads:
    """Where each chain of an on-sale ends: its root chain's, and each lane's (ascending)."""

    root: tuple[int, str]
    lanes: tuple[tuple[int, int, str], ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "root": {"seq": self.root[0], "hash": self.root[1]},
            "lanes": [{"lane": lane, "seq": seq, "hash": h} for lane, seq, h in self.lanes],
        }


def chain_heads(*, event_id: int, lock: bool = False) -> Heads | None:
    """The on-sale's chain heads as committed (locked, in the order every append takes them,
    with ``lock``), or None when it has none left."""
    lanes = AuditLaneHead.objects.filter(event_id=event_id).order_by("lane")
    root = AuditChainHead.objects.filter(event_id=event_id)
    if lock:
        lanes, root = lanes.select_for_update(), root.select_for_update()
    lane_heads = tuple(lanes.values_list("lane", "seq", "last_hash"))
    found = root.values_list("seq", "last_hash").first()
    if found is None:
        return None
    return Heads(root=found, lanes=lane_heads)


def status_counts(*, event_id: int) -> dict[str, int]:
    """The on-sale's entries by status (the archive's final counts)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT status, count(*) FROM {QueueEntry._meta.db_table}"
            " WHERE event_id = %s GROUP BY status ORDER BY status",
            [event_id],
        )
        return {status: n for status, n in cursor.fetchall()}


def _delete_in_batches(sql: str, event_id: int) -> int:
    """Run ``sql`` (a DELETE of at most %s rows of the on-sale, its parameters the event id
    and the batch) until it deletes nothing; each batch commits on its own."""
    removed = 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(sql, [event_id, DELETE_BATCH])
            removed += cursor.rowcount
            if cursor.rowcount < DELETE_BATCH:
                return removed


_ENTRIES = QueueEntry._meta.db_table
_LINKS = PlaceLink._meta.db_table
_RECORDS = AuditRecord._meta.db_table
_DELETE_LINKS = (
    f"DELETE FROM {_LINKS} WHERE id IN (SELECT link.id FROM {_LINKS} AS link"
    f" JOIN {_ENTRIES} AS entry ON entry.id = link.entry_id WHERE entry.event_id = %s LIMIT %s)"
)
_DELETE_ENTRIES = (
    f"DELETE FROM {_ENTRIES} WHERE id IN (SELECT id FROM {_ENTRIES} WHERE event_id = %s LIMIT %s)"
)
_DELETE_RECORDS = (
    f"DELETE FROM {_RECORDS} WHERE id IN (SELECT id FROM {_RECORDS} WHERE event_id = %s LIMIT %s)"
)


@dataclass(frozen=True)
class Removed:
    entries: int
    records: int
    place_links: int


def archived_rows_delete(*, event_id: int) -> Removed:
    """Remove the on-sale's place links, entries, audit records, chain heads and admission
    bookkeeping, a batch at a time (outside any transaction: each batch commits alone, and
    a run cut short is finished by the next). Its tiers and the on-sale's own row stay, and
    so does a draw's publication (its registrations' hashes and outcomes, its invitations,
    which anyone may still check): the used invitations only let go of the entries they
    joined as, which go with the rest of the line."""
    if connection.in_atomic_block:
        raise RuntimeError("the removal commits batch by batch: call it outside a transaction")
    Invitation.objects.filter(event_id=event_id, entry__isnull=False).update(entry=None)
    links = _delete_in_batches(_DELETE_LINKS, event_id)
    entries = _delete_in_batches(_DELETE_ENTRIES, event_id)
    records = _delete_in_batches(_DELETE_RECORDS, event_id)
    AuditLaneHead.objects.filter(event_id=event_id).delete()
    AuditChainHead.objects.filter(event_id=event_id).delete()
    AdmissionState.objects.filter(event_id=event_id).delete()
    return Removed(entries=entries, records=records, place_links=links)
