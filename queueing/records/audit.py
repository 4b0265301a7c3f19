"""Appending to an event's hash-chained audit trail, one chain per lane.

``hash = sha256(prev_hash + canonical(record))`` where the canonical form is compact JSON with
sorted keys, stated byte for byte in docs/api.md ("The canonical form"), which outsiders check
with scripts/verify_trail.py: change it here and both must change. Appends take the row lock of
their chain's head, so records of one chain are chained in commit order; the lock is held
only until the caller's transaction commits, which is why callers append as the last step of
their transaction.

An on-sale has one chain, its root chain (records with no lane), unless it has lanes: then
each lane has a chain and a head of its own (docs/api.md, "Lanes"), so that appends to
different lanes do not wait for each other. Which records go where is ``ROOT_ONLY``'s rule; a
transaction that appends to a lane and to the root takes the lane's head first (lanes in
ascending order, then the root), the one order that cannot deadlock.

Over 350 lines on purpose: the canonical form and the records prebuilt around it before the
lock (``audit_frames``) are one byte layout, which must change together.
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

from queueing.models import AuditAction, AuditChainHead, AuditLaneHead, AuditRecord
from queueing.records.bulk_insert import copy_rows


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
    lane: int | None = None,
) -> str:
    hashed = {
        "event": event_id,
        "seq": seq,
        "at": hashed_at(at),
        "ticket_id": str(ticket_id) if ticket_id else None,
        "action": action,
        "actor": actor,
        "data": data,
    }
    if lane is not None:
        # Left out when null, so that the records of an on-sale without lanes hash as they
        # always did.
        hashed["lane"] = lane
    return canonical_json(hashed)


def chain_hash(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


class Hashed(Protocol):
    """What a record's hash is computed from: a saved ``AuditRecord``, or a row of its fields
    read without building one (``audit_chain_verify``)."""

    event_id: int
    lane: int | None
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
            lane=record.lane,
        ),
    )


RECORD_FIELDS = (
    "event_id",
    "lane",
    "seq",
    "at",
    "ticket_id",
    "action",
    "actor",
    "data",
    "prev_hash",
    "hash",
)


ChainHead = AuditChainHead | AuditLaneHead

# Records of the on-sale as a whole, and those of the admission (its order is the root
# chain's seq order): never in a lane's chain, whatever the on-sale's lanes.
ROOT_ONLY = frozenset(
    {
        AuditAction.EVENT_CREATED,
        AuditAction.EVENT_CHANGED,
        AuditAction.EVENT_PAUSED,
        AuditAction.EVENT_RESUMED,
        AuditAction.EVENT_CLOSED,
        AuditAction.EVENT_SOLD_OUT,
        AuditAction.SHUFFLED,
        AuditAction.ADMITTED,
        AuditAction.AWAY,
        AuditAction.REJECTED,
        AuditAction.ROOT,
    }
)

_MOVE_ROOT_HEAD = (
    f"UPDATE {AuditChainHead._meta.db_table} SET seq = %s, last_hash = %s WHERE event_id = %s"
)
_MOVE_LANE_HEAD = (
    f"UPDATE {AuditLaneHead._meta.db_table} SET seq = %s, last_hash = %s"
    " WHERE event_id = %s AND lane = %s"
)


@dataclass(frozen=True)
class AuditItem:
    """One record to append; several can share one lock of the chain head."""

    action: AuditAction
    ticket_id: uuid.UUID | None = None
    data: dict[str, Any] | None = None
    at: datetime | None = None  # when it happened, if not when the batch did


def audit_chain_lock(*, event_id: int, lane: int | None = None) -> ChainHead:
    """Take a chain head's lock (the root chain's, or ``lane``'s) early in a transaction
    (released at commit); the head, to hand to ``audit_append_many`` in the same transaction
    rather than read it again."""
    if lane is None:
        return AuditChainHead.objects.select_for_update().get(event_id=event_id)
    return AuditLaneHead.objects.select_for_update().get(event_id=event_id, lane=lane)


def audit_chains_lock(*, event_id: int) -> list[ChainHead]:
    """Every chain head of the on-sale locked, its lanes' in ascending order and then its
    root's (the order every transaction takes them in): for what must exclude every append,
    such as the start that decides who is in the pre-queue. The root's head comes last."""
    lanes: list[ChainHead] = list(
        AuditLaneHead.objects.select_for_update().filter(event_id=event_id).order_by("lane")
    )
    return [*lanes, audit_chain_lock(event_id=event_id)]


def audit_chain_start(*, event_id: int, lanes: int = 1) -> None:
    """The heads a new on-sale needs: its root chain's, and one per lane when it has more
    than one."""
    AuditChainHead.objects.create(event_id=event_id)
    if lanes > 1:
        audit_lane_heads_ensure(event_id=event_id, lanes=lanes)


def audit_lane_heads_ensure(*, event_id: int, lanes: int) -> None:
    """Idempotent: a head for each of lanes 0..``lanes``-1 when ``lanes`` > 1, none beyond.
    Heads beyond are removed only while empty: a lane with records keeps its chain (the
    on-sale's lanes are fixed once anyone is in its line, so that does not happen)."""
    wanted = range(lanes) if lanes > 1 else range(0)
    AuditLaneHead.objects.bulk_create(
        [AuditLaneHead(event_id=event_id, lane=lane) for lane in wanted],
        ignore_conflicts=True,
    )
    AuditLaneHead.objects.filter(event_id=event_id, lane__gte=len(wanted), seq=0).delete()


def _head_lane(lane: int | None, locked_head: ChainHead | None) -> int | None:
    if locked_head is not None and locked_head.lane != lane:
        raise ValueError(f"the head of lane {locked_head.lane} handed for lane {lane}")
    return lane


@dataclass
class Framed:
    """A record built but for what only the chain head's holder knows: its seq and links.

    Its canonical JSON (keys sorted: action, actor, at, data, event, lane, seq, ticket_id) is
    ``front`` + the data's JSON + ``middle`` + seq + ``back``. The data is written out when
    the record is appended: a join's holds its order key and status, known only once its
    entries are inserted (under the lock, when the join has something to decide there).
    """

    at: datetime
    ticket_id: uuid.UUID | None
    action: str
    data: dict[str, Any]
    front: str
    middle: str
    back: str

    def canonical(self, *, seq: int, data: str) -> str:
        """The record's canonical JSON, given its seq and its data's canonical JSON."""
        return self.front + data + self.middle + str(seq) + self.back


def audit_frames(
    *, event_id: int, actor: str, at: datetime, items: Iterable[AuditItem], lane: int | None
) -> list[Framed]:
    """``items`` as records ready to append to ``lane``'s chain (the root's for None): built
    before the chain head's lock is taken, so that its holder only numbers and links them."""
    frames = []
    ending = f',"event":{event_id}' + ("" if lane is None else f',"lane":{lane}') + ',"seq":'
    for item in items:
        if lane is not None and item.action in ROOT_ONLY:
            raise ValueError("a record of the on-sale as a whole or of admission goes in no lane")
        when = item.at or at
        ticket = None if item.ticket_id is None else str(item.ticket_id)
        frames.append(
            Framed(
                at=when,
                ticket_id=item.ticket_id,
                action=str(item.action),  # the value, not the enum's member
                data=item.data if item.data is not None else {},
                front=(
                    f'{{"action":{canonical_json(str(item.action))},"actor":{canonical_json(actor)}'
                    f',"at":"{hashed_at(when)}","data":'
                ),
                middle=ending,
                back=f',"ticket_id":{canonical_json(ticket)}}}',
            )
        )
    return frames


def audit_append_framed(
    *,
    event_id: int,
    actor: str,
    frames: list[Framed],
    locked_head: ChainHead | None = None,
    lane: int | None = None,
) -> list[tuple[int, str, str]]:
    """Append ``frames`` (``audit_frames``'s, for the same ``lane``): each one's seq,
    prev_hash and hash."""
    if not connection.in_atomic_block:
        raise RuntimeError("audit records must be written in the transaction of the change")
    if not frames:
        return []
    lane = _head_lane(lane, locked_head)
    head = locked_head or audit_chain_lock(event_id=event_id, lane=lane)
    # Under the head's lock from here on: the data's JSON, a SHA-256 per record, one COPY and
    # the head's move.
    prev_hash, seq = head.last_hash, head.seq
    columns: dict[str, list[Any]] = {name: [] for name in RECORD_FIELDS}
    sha256 = hashlib.sha256
    for frame in frames:
        seq += 1
        data = canonical_json(frame.data)
        digest = sha256((prev_hash + frame.canonical(seq=seq, data=data)).encode()).hexdigest()
        columns["seq"].append(seq)
        columns["at"].append(frame.at)
        columns["ticket_id"].append(frame.ticket_id)
        columns["action"].append(frame.action)
        columns["data"].append(data)
        columns["prev_hash"].append(prev_hash)
        columns["hash"].append(digest)
        prev_hash = digest
    count = len(frames)
    columns["event_id"], columns["lane"] = [event_id] * count, [lane] * count
    columns["actor"] = [actor] * count
    copy_rows(
        AuditRecord, RECORD_FIELDS, zip(*(columns[name] for name in RECORD_FIELDS), strict=True)
    )
    with connection.cursor() as cursor:
        if lane is None:
            cursor.execute(_MOVE_ROOT_HEAD, (seq, prev_hash, event_id))
        else:
            cursor.execute(_MOVE_LANE_HEAD, (seq, prev_hash, event_id, lane))
    head.seq, head.last_hash = seq, prev_hash
    return list(zip(columns["seq"], columns["prev_hash"], columns["hash"], strict=True))


def audit_append_many(
    *,
    event_id: int,
    actor: str,
    at: datetime,
    items: Iterable[AuditItem],
    locked_head: ChainHead | None = None,
    lane: int | None = None,
) -> list[tuple[int, str, str]]:
    """Append ``items`` to the root chain, or to ``lane``'s (``locked_head`` is that chain's
    head, when the caller took its lock already); each one's seq, prev_hash and hash. The
    records are built before the lock is taken, when the caller has not taken it yet."""
    lane = _head_lane(lane, locked_head)
    frames = audit_frames(event_id=event_id, actor=actor, at=at, items=items, lane=lane)
    return audit_append_framed(
        event_id=event_id, actor=actor, frames=frames, locked_head=locked_head, lane=lane
    )


def audit_append(
    *,
    event_id: int,
    action: AuditAction,
    actor: str,
    at: datetime,
    ticket_id: uuid.UUID | None = None,
    data: dict[str, Any] | None = None,
    lane: int | None = None,
    locked_head: ChainHead | None = None,
) -> AuditRecord:
    ((seq, prev_hash, digest),) = audit_append_many(
        event_id=event_id,
        actor=actor,
        at=at,
        items=[AuditItem(action=action, ticket_id=ticket_id, data=data)],
        lane=lane,
        locked_head=locked_head,
    )
    # As saved, but for its row id (not read back).
    return AuditRecord(
        event_id=event_id,
        lane=lane,
        seq=seq,
        at=at,
        ticket_id=ticket_id,
        action=action,
        actor=actor,
        data=data or {},
        prev_hash=prev_hash,
        hash=digest,
    )
