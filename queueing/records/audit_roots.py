"""Root records: the on-sale's root chain commits to every lane's chain, a tick at a time.

An on-sale with lanes has a chain per lane, each gapless and linked on its own, so no one
chain orders them all. A ``root`` record in the root chain lists every lane's head as it was
then (lane, seq, hash) and a Merkle root over them (``rules/merkle.py``): one hash of the root
chain then vouches for every lane up to those heads, and cutting or rewriting a lane's past
breaks a root that an earlier check or export has seen. The rule is docs/api.md's ("Root
records").

The on-sale's tick writes one (``audit_root_write``), and only when some lane's head moved
since the last: an on-sale whose lanes are still costs one query a tick, and an on-sale
without lanes one query that finds no lane.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, transaction

from queueing.models import AuditAction, AuditChainHead, AuditLaneHead, AuditRecord
from queueing.records.audit import AuditItem, audit_append_many, audit_chain_lock
from queueing.rules.merkle import LaneHead, merkle_root

ROOT_ACTOR = "system:audit"

_HEADS = (
    f"SELECT lane.lane, lane.seq, lane.last_hash, root.rooted"
    f" FROM {AuditLaneHead._meta.db_table} AS lane"
    f" JOIN {AuditChainHead._meta.db_table} AS root ON root.event_id = lane.event_id"
    " WHERE lane.event_id = %s ORDER BY lane.lane"
)


def root_data(heads: list[LaneHead]) -> dict[str, Any]:
    """A root record's ``data``."""
    return {
        "lanes": [{"lane": h.lane, "seq": h.seq, "hash": h.hash} for h in heads],
        "merkle_root": merkle_root(heads),
    }


def _lane_heads(event_id: int) -> tuple[list[LaneHead], str]:
    """The lanes' heads as committed, and what the last root committed to ("" before it)."""
    with connection.cursor() as cursor:
        cursor.execute(_HEADS, [event_id])
        rows = cursor.fetchall()
    heads = [LaneHead(lane=lane, seq=seq, hash=last_hash) for lane, seq, last_hash, _ in rows]
    return heads, rows[0][3] if rows else ""


def _due(heads: list[LaneHead], rooted: str) -> str | None:
    """The Merkle root to write, or None: no lanes, nothing appended to any, or no lane
    moved since the last root."""
    if not heads or not any(head.seq for head in heads):
        return None
    root = merkle_root(heads)
    return None if root == rooted else root


def audit_root_write(*, event_id: int, now: datetime) -> AuditRecord | None:
    """A root record for ``event_id`` if its lanes moved since the last one; the record."""
    heads, rooted = _lane_heads(event_id)
    if _due(heads, rooted) is None:
        return None
    with transaction.atomic():
        # Under the root chain's lock the heads are read again: every root written before
        # committed first, so the heads a root lists never go back from one root to the next.
        root_head = audit_chain_lock(event_id=event_id)
        heads, _ = _lane_heads(event_id)
        merkle = _due(heads, root_head.rooted)
        if merkle is None:
            return None
        (record,) = audit_append_many(
            event_id=event_id,
            actor=ROOT_ACTOR,
            at=now,
            locked_head=root_head,
            items=[AuditItem(action=AuditAction.ROOT, data=root_data(heads))],
        )
        AuditChainHead.objects.filter(event_id=event_id).update(rooted=merkle)
    return record
