"""Root records: the on-sale's root chain commits to every lane's chain, a tick at a time.

An on-sale with lanes has a chain per lane, each gapless and linked on its own, so no one
chain orders them all. A ``root`` record in the root chain lists every lane's head as it was
then (lane, seq, hash) and a Merkle root over them (``rules/merkle.py``): one hash of the root
chain then vouches for every lane up to those heads, and cutting or rewriting a lane's past
breaks a root that an earlier check or export has seen. The rule is docs/api.md's ("Root
records").

``roots_check`` checks them, for ``records/audit_verify.py``'s verdict. The on-sale's tick
writes one (``audit_root_write``), and only when some lane's head moved
since the last: an on-sale whose lanes are still costs one query a tick, and an on-sale
without lanes one query that finds no lane.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from queueing.models import GENESIS_HASH, AuditAction, AuditChainHead, AuditLaneHead, AuditRecord
from queueing.records.audit import audit_append, audit_chain_lock
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
        record = audit_append(
            event_id=event_id,
            action=AuditAction.ROOT,
            actor=ROOT_ACTOR,
            at=now,
            data=root_data(heads),
            locked_head=root_head,
        )
        AuditChainHead.objects.filter(event_id=event_id).update(rooted=merkle)
    return record


# ------------------------------------------------------------------ checking them


RootRow = tuple[int, int, Any]  # a root record's id, seq and data


def _listed(data: Any) -> list[LaneHead] | None:
    """The heads a root record lists, or None when its data is not a root's."""
    try:
        heads = [LaneHead(lane=h["lane"], seq=h["seq"], hash=h["hash"]) for h in data["lanes"]]
    except (KeyError, TypeError):
        return None
    fine = all(
        type(h.lane) is int and type(h.seq) is int and h.seq >= 0 and isinstance(h.hash, str)
        for h in heads
    )
    return heads if fine and isinstance(data.get("merkle_root"), str) else None


@dataclass(frozen=True)
class BadRoot:
    record_id: int
    seq: int
    problem: str


def roots_check(
    event_id: int, lanes: list[int], roots: list[RootRow], *, after_seq: int
) -> BadRoot | None:
    """The first of ``roots`` (root records as (id, seq, data), in seq order, the root
    chain found intact up to them) that is wrong, and what: its lanes are not the on-sale's
    ``lanes``, its Merkle root is not over the heads it lists, a head it lists is not a
    record of that lane with that hash, or a lane went back from the root before (the last
    root at or before ``after_seq``, where an earlier check stopped)."""
    before = (
        AuditRecord.objects.filter(
            event_id=event_id, lane=None, action=AuditAction.ROOT, seq__lte=after_seq
        )
        .order_by("-seq")
        .values_list("data", flat=True)
        .first()
        if after_seq
        else None
    )
    last_seq = {h.lane: h.seq for h in (_listed(before) or [])}
    existing = _listed_hashes(event_id, roots)
    for record_id, seq, data in roots:
        problem = _root_problem(data, lanes, last_seq, existing)
        if problem:
            return BadRoot(record_id=record_id, seq=seq, problem=problem)
        last_seq = {h.lane: h.seq for h in _listed(data) or []}
    return None


def _root_problem(
    data: Any,
    lanes: list[int],
    last_seq: dict[int, int],
    existing: dict[tuple[int, int], str],
) -> str:
    heads = _listed(data)
    if heads is None:
        return "its data is not a list of lane heads with a Merkle root"
    if [h.lane for h in heads] != lanes:
        return f"it lists lanes {[h.lane for h in heads]}, the on-sale has {lanes}"
    if merkle_root(heads) != data["merkle_root"]:
        return "its merkle_root is not the root over the heads it lists"
    for head in heads:
        if head.seq < last_seq.get(head.lane, 0):
            return f"lane {head.lane} is at seq {head.seq}, behind the root before it"
        found = GENESIS_HASH if head.seq == 0 else existing.get((head.lane, head.seq))
        if found is None:
            return f"it lists lane {head.lane} at seq {head.seq}, which is not there"
        if found != head.hash:
            return f"the hash it lists for lane {head.lane} at seq {head.seq} is not that record's"
    return ""


_HASHES_OF = (
    f"SELECT record.lane, record.seq, record.hash FROM {AuditRecord._meta.db_table} AS record"
    " JOIN unnest(%s::smallint[], %s::bigint[]) AS listed(lane, seq)"
    " ON record.lane = listed.lane AND record.seq = listed.seq"
    " WHERE record.event_id = %s"
)
_CHUNK = 10_000


def _listed_hashes(event_id: int, roots: list[RootRow]) -> dict[tuple[int, int], str]:
    """The stored hash of every (lane, seq) the roots list: a query per 10,000 of them."""
    wanted = sorted(
        {(h.lane, h.seq) for _, _, data in roots for h in (_listed(data) or []) if h.seq > 0}
    )
    found: dict[tuple[int, int], str] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            cursor.execute(
                _HASHES_OF, [[lane for lane, _ in chunk], [seq for _, seq in chunk], event_id]
            )
            found.update({(lane, seq): digest for lane, seq, digest in cursor.fetchall()})
    return found
