"""Checking an on-sale's audit trail: each chain's hashes, links and seqs.

Each chain (the root chain, or a lane's) is recomputed from its records, up to the head read
first; ``audit_chain_verify`` checks one. The whole on-sale's verdict, every lane and the root
records that commit to them, is ``audit_event_verify`` (below).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from queueing.models import GENESIS_HASH, AuditAction, AuditChainHead, AuditLaneHead, AuditRecord
from queueing.records.audit import RECORD_FIELDS, ChainHead, Hashed, record_hash
from queueing.records.audit_roots import roots_check


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
_CHECKED_FIELDS = ("id", *RECORD_FIELDS)


def _record_problem(record: Hashed, *, expected_seq: int, prev_hash: str) -> str:
    if record.seq != expected_seq:
        return f"seq {record.seq} where seq {expected_seq} was due"
    if record.prev_hash != prev_hash:
        return f"its prev_hash is not the hash of seq {expected_seq - 1}"
    if record.hash != record_hash(record):
        return "its hash does not match its contents"
    return ""


def _head(event_id: int, lane: int | None) -> ChainHead | None:
    if lane is None:
        return AuditChainHead.objects.filter(event_id=event_id).first()
    return AuditLaneHead.objects.filter(event_id=event_id, lane=lane).first()


def audit_chain_verify(
    *,
    event_id: int,
    lane: int | None = None,
    batch_size: int = 5000,
    after_seq: int = 0,
    after_hash: str = GENESIS_HASH,
    limit: int | None = None,
) -> ChainVerdict:
    """Recompute one chain (the root chain, or ``lane``'s): every hash, every link, and no
    gap in ``seq``.

    The head is read first and only records up to its ``seq`` are checked: those were all
    committed before the head was read, so appends during a live sale are not mistaken for
    tampering.

    ``after_seq``/``after_hash``: go on from an earlier check that found the chain intact up
    to that record (whose hash must still be ``after_hash``), so a long trail is not read again
    from its start. ``limit``: check at most that many records this time; the verdict says
    where it stopped (``checked_seq``, ``complete``).
    """
    head = _head(event_id, lane)
    chain = AuditRecord.objects.filter(event_id=event_id, lane=lane)
    head_seq = head.seq if head is not None else 0
    if after_seq:
        # The record gone on from must be as it was: its stored hash, and its contents.
        anchor = chain.filter(seq=after_seq).first()
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
    records = chain.filter(seq__gt=after_seq).order_by("seq")
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


# ------------------------------------------------------------------ the whole on-sale


@dataclass(frozen=True)
class Progress:
    """Where an earlier check of one chain found it intact: up to ``seq``, whose hash was
    ``hash``."""

    seq: int = 0
    hash: str = GENESIS_HASH


@dataclass(frozen=True)
class EventVerdict:
    """One verdict for an on-sale: its root chain, each lane's chain, and the root records
    that commit to the lanes. Without lanes, exactly its one chain's verdict."""

    root: ChainVerdict
    lanes: dict[int, ChainVerdict] = field(default_factory=dict)
    roots_checked: int = 0  # root records whose heads and Merkle root were checked
    # When a root record is wrong (its chain being intact): which, and what.
    bad_root_id: int | None = None
    bad_root_seq: int | None = None
    root_problem: str = ""

    @property
    def ok(self) -> bool:
        return self.root.ok and not self.root_problem and all(v.ok for v in self.lanes.values())

    @property
    def records(self) -> int:
        return self.root.records + sum(v.records for v in self.lanes.values())

    @property
    def complete(self) -> bool:
        return not self.ok or (self.root.complete and all(v.complete for v in self.lanes.values()))

    @property
    def bad_lane(self) -> int | None:
        """The lane whose chain failed first (None: the root chain's, or a root record)."""
        if not self.root.ok or self.root_problem:
            return None
        return next((lane for lane, v in sorted(self.lanes.items()) if not v.ok), None)

    @property
    def first_bad_id(self) -> int | None:
        if not self.root.ok:
            return self.root.first_bad_id
        if self.root_problem:
            return self.bad_root_id
        lane = self.bad_lane
        return self.lanes[lane].first_bad_id if lane is not None else None

    @property
    def problem(self) -> str:
        """What failed first, naming its chain; "" when all held."""
        if not self.root.ok:
            return f"{_ROOT_CHAIN if self.lanes else ''}{self.root.problem}"
        if self.root_problem:
            return f"{_ROOT_CHAIN}the root record at seq {self.bad_root_seq}: {self.root_problem}"
        lane = self.bad_lane
        return f"lane {lane}: {self.lanes[lane].problem}" if lane is not None else ""


_ROOT_CHAIN = "the root chain: "


def audit_event_verify(
    *,
    event_id: int,
    after: Mapping[int | None, Progress] | None = None,
    limit: int | None = None,
    batch_size: int = 5000,
) -> EventVerdict:
    """Check every chain of the on-sale (the root chain first, then each lane's) and every
    root record the check of the root chain reached: its lanes are the on-sale's, its Merkle
    root is theirs, each head it lists is a record of that lane with that hash, and no lane
    goes back from the root before. ``after``: where earlier checks found each chain intact
    (keyed by lane, None for the root chain); ``limit``: at most that many records this
    time, shared by the chains in that order."""
    after = after or {}
    heads = AuditLaneHead.objects.filter(event_id=event_id).order_by("lane")
    lanes = list(heads.values_list("lane", flat=True))
    left = limit

    def check(lane: int | None) -> ChainVerdict:
        nonlocal left
        start = after.get(lane, Progress())
        verdict = audit_chain_verify(
            event_id=event_id,
            lane=lane,
            after_seq=start.seq,
            after_hash=start.hash,
            limit=left,
            batch_size=batch_size,
        )
        if left is not None:
            left = max(left - verdict.records, 0)
        return verdict

    root = check(None)
    if not lanes:
        return EventVerdict(root=root)
    by_lane = {lane: check(lane) for lane in lanes}
    if not root.ok:
        return EventVerdict(root=root, lanes=by_lane)
    start = after.get(None, Progress())
    roots = list(
        AuditRecord.objects.filter(
            event_id=event_id,
            lane=None,
            action=AuditAction.ROOT,
            seq__gt=start.seq,
            seq__lte=root.checked_seq,
        )
        .order_by("seq")
        .values_list("id", "seq", "data")
    )
    bad = roots_check(event_id, lanes, roots, after_seq=start.seq)
    return EventVerdict(
        root=root,
        lanes=by_lane,
        roots_checked=len(roots),
        bad_root_id=bad.record_id if bad else None,
        bad_root_seq=bad.seq if bad else None,
        root_problem=bad.problem if bad else "",
    )
