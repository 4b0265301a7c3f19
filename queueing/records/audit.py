"""Appending to and checking an event's hash-chained audit trail.

``hash = sha256(prev_hash + canonical(record))`` where the canonical form is compact JSON with
sorted keys, stated byte for byte in docs/api.md ("The canonical form"), which outsiders check
with scripts/verify_trail.py: change it here and both must change. Appends take the row lock of
the event's chain head, so records of one event are chained in commit order; the lock is held
only until the caller's transaction commits, which is why callers append as the last step of
their transaction.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from django.db import connection

from queueing.models import GENESIS_HASH, AuditAction, AuditChainHead, AuditRecord
from queueing.records.bulk_insert import insert_rows


def hashed_at(at: datetime) -> str:
    """``at`` as the hash covers it (and the auditors' API shows it, as ``at_hashed``): UTC,
    always six digits of microseconds, ``+00:00``."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys, non-ASCII characters as themselves: the form the hash
    covers, and the CSV export's ``data``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_record(
    *,
    event_id: int,
    seq: int,
    at: datetime,
    ticket_id: uuid.UUID | None,
    action: str,
    actor: str,
    data: dict[str, Any],
) -> str:
    return canonical_json(
        {
            "event": event_id,
            "seq": seq,
            "at": hashed_at(at),
            "ticket_id": str(ticket_id) if ticket_id else None,
            "action": action,
            "actor": actor,
            "data": data,
        }
    )


def chain_hash(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


class Hashed(Protocol):
    """What a record's hash is computed from: a saved ``AuditRecord``, or a row of its fields
    read without building one (``audit_chain_verify``)."""

    event_id: int
    seq: int
    at: datetime
    ticket_id: uuid.UUID | None
    action: str
    actor: str
    data: dict[str, Any]
    prev_hash: str
    hash: str


def record_hash(record: Hashed) -> str:
    return chain_hash(
        record.prev_hash,
        canonical_record(
            event_id=record.event_id,
            seq=record.seq,
            at=record.at,
            ticket_id=record.ticket_id,
            action=record.action,
            actor=record.actor,
            data=record.data,
        ),
    )


_RECORD_FIELDS = (
    "event_id",
    "seq",
    "at",
    "ticket_id",
    "action",
    "actor",
    "data",
    "prev_hash",
    "hash",
)


_MOVE_HEAD = (
    f"UPDATE {AuditChainHead._meta.db_table} SET seq = %s, last_hash = %s WHERE event_id = %s"
)


@dataclass(frozen=True)
class AuditItem:
    """One record to append; several can share one lock of the chain head."""

    action: AuditAction
    ticket_id: uuid.UUID | None = None
    data: dict[str, Any] | None = None
    at: datetime | None = None  # when it happened, if not when the batch did


def audit_chain_lock(*, event_id: int) -> AuditChainHead:
    """Take the chain head's lock early in a transaction (released at commit); the head, to
    hand to ``audit_append_many`` in the same transaction rather than read it again."""
    return AuditChainHead.objects.select_for_update().get(event_id=event_id)


def audit_chain_start(*, event_id: int) -> None:
    AuditChainHead.objects.create(event_id=event_id)


def audit_append_many(
    *,
    event_id: int,
    actor: str,
    at: datetime,
    items: Iterable[AuditItem],
    locked_head: AuditChainHead | None = None,
) -> list[AuditRecord]:
    if not connection.in_atomic_block:
        raise RuntimeError("audit records must be written in the transaction of the change")
    items = list(items)
    if not items:
        return []
    head = locked_head or AuditChainHead.objects.select_for_update().get(event_id=event_id)
    records = []
    prev_hash, seq = head.last_hash, head.seq
    for item in items:
        seq += 1
        record = AuditRecord(
            event_id=event_id,
            seq=seq,
            at=item.at or at,
            ticket_id=item.ticket_id,
            action=item.action,
            actor=actor,
            data=item.data or {},
            prev_hash=prev_hash,
        )
        record.hash = record_hash(record)
        prev_hash = record.hash
        records.append(record)
    # The records and the head's move in one round trip: this runs under the head's lock.
    insert_rows(
        AuditRecord,
        _RECORD_FIELDS,
        [[getattr(record, name) for name in _RECORD_FIELDS] for record in records],
        then=(_MOVE_HEAD, (seq, prev_hash, event_id)),
    )
    head.seq, head.last_hash = seq, prev_hash
    return records


def audit_append(
    *,
    event_id: int,
    action: AuditAction,
    actor: str,
    at: datetime,
    ticket_id: uuid.UUID | None = None,
    data: dict[str, Any] | None = None,
) -> AuditRecord:
    (record,) = audit_append_many(
        event_id=event_id,
        actor=actor,
        at=at,
        items=[AuditItem(action=action, ticket_id=ticket_id, data=data)],
    )
    return record


@dataclass(frozen=True)
class ChainVerdict:
    ok: bool
    records: int
    first_bad_id: int | None
    # Where the check stopped: every record up to ``checked_seq`` is intact and the last of
    # them has ``checked_hash``; a later check can go on from there (``after_seq``).
    checked_seq: int = 0
    checked_hash: str = GENESIS_HASH
    # The chain head's seq when the check began: records beyond it were not looked at.
    head_seq: int = 0
    first_bad_seq: int | None = None
    problem: str = ""  # what failed, in words, when not ok

    @property
    def complete(self) -> bool:
        """Whether the check reached the head (else a limit stopped it, and so far all held)."""
        return not self.ok or self.checked_seq >= self.head_seq


# A check reads these as plain rows: building a model instance per record cost more than
# hashing it.
_CHECKED_FIELDS = ("id", *_RECORD_FIELDS)


def _record_problem(record: Hashed, *, expected_seq: int, prev_hash: str) -> str:
    if record.seq != expected_seq:
        return f"seq {record.seq} where seq {expected_seq} was due"
    if record.prev_hash != prev_hash:
        return f"its prev_hash is not the hash of seq {expected_seq - 1}"
    if record.hash != record_hash(record):
        return "its hash does not match its contents"
    return ""


def audit_chain_verify(
    *,
    event_id: int,
    batch_size: int = 5000,
    after_seq: int = 0,
    after_hash: str = GENESIS_HASH,
    limit: int | None = None,
) -> ChainVerdict:
    """Recompute the chain: every hash, every link, and no gap in ``seq``.

    The head is read first and only records up to its ``seq`` are checked: those were all
    committed before the head was read, so appends during a live sale are not mistaken for
    tampering.

    ``after_seq``/``after_hash``: go on from an earlier check that found the chain intact up
    to that record (whose hash must still be ``after_hash``), so a long trail is not read again
    from its start. ``limit``: check at most that many records this time; the verdict says
    where it stopped (``checked_seq``, ``complete``).
    """
    head = AuditChainHead.objects.filter(event_id=event_id).first()
    head_seq = head.seq if head is not None else 0
    if after_seq:
        # The record gone on from must be as it was: its stored hash, and its contents.
        anchor = AuditRecord.objects.filter(event_id=event_id, seq=after_seq).first()
        if anchor is None or not (anchor.hash == after_hash == record_hash(anchor)):
            return ChainVerdict(
                ok=False,
                records=0,
                first_bad_id=anchor.id if anchor else None,
                head_seq=head_seq,
                first_bad_seq=after_seq,
                problem=(
                    f"seq {after_seq} changed since it was last checked"
                    if anchor
                    else f"seq {after_seq} is gone since it was last checked"
                ),
            )
    records = AuditRecord.objects.filter(event_id=event_id, seq__gt=after_seq).order_by("seq")
    if head is not None:
        records = records.filter(seq__lte=head.seq)
    prev_hash, expected_seq, count = after_hash, after_seq + 1, 0
    batch = (records[:limit] if limit is not None else records).values_list(
        *_CHECKED_FIELDS, named=True
    )
    for record in batch.iterator(chunk_size=batch_size):
        count += 1
        problem = _record_problem(record, expected_seq=expected_seq, prev_hash=prev_hash)
        if problem:
            return ChainVerdict(
                ok=False,
                records=records.count(),
                first_bad_id=record.id,
                checked_seq=expected_seq - 1,
                checked_hash=prev_hash,
                head_seq=head_seq,
                first_bad_seq=record.seq,
                problem=problem,
            )
        prev_hash, expected_seq = record.hash, expected_seq + 1
    checked = expected_seq - 1
    stopped_early = limit is not None and count == limit and checked < head_seq
    if (
        head is not None
        and not stopped_early
        and (head.seq != checked or head.last_hash != prev_hash)
    ):
        # Records were removed from the end of the chain.
        return ChainVerdict(
            ok=False,
            records=count,
            first_bad_id=None,
            checked_seq=checked,
            checked_hash=prev_hash,
            head_seq=head_seq,
            problem=(
                f"records missing at the end of the chain (its head is at seq {head.seq})"
                if head.seq != checked
                else f"seq {checked} is not the record the chain head holds"
            ),
        )
    return ChainVerdict(
        ok=True,
        records=count,
        first_bad_id=None,
        checked_seq=checked,
        checked_hash=prev_hash,
        head_seq=head_seq if head is not None else checked,
    )
