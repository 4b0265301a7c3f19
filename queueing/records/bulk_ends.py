"""Ending many entries at once, each with its audit record: a line revoked after a close, the
unseen expired. One transaction per chunk (tens of thousands of entries for a revocation), so
that a million end in twenty transactions rather than a thousand, and a run killed between
chunks leaves every committed chunk whole and the rest untouched: the next run goes on from
there, and the compare-and-set means nobody ends twice.

Per chunk: one ``UPDATE ... RETURNING`` moves the entries; then, under the chain head's lock,
the records are hashed here (their canonical text filled into a template taken once from
``audit.canonical_record``, so the form is stated in one place) and written with one
``COPY``, the head's move after it. The hashes chain, so they cannot be computed before the
head is locked: 0.4 s for a chunk of 50,000 (the hashes and the rows' text). ``COPY``, not
the ``unnest`` insert of records/bulk_insert.py: adapting a chunk's arrays cost psycopg more
than PostgreSQL's whole insert (docs/benchmarks.md, the line-end row).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from queueing.in_process import closes_old_connections
from queueing.models import AuditAction, AuditChainHead, AuditRecord, QueueEntry
from queueing.records.audit import audit_chain_lock, canonical_json, canonical_record, chain_hash
from queueing.records.transitions import ending_assignments
from queueing.rules.states import EntryStatus, sources_of


@dataclass(frozen=True)
class Ended:
    """An entry ended by a bulk run, and the status it ended from."""

    id: int
    public_id: uuid.UUID
    tier_id: int
    order_key: int
    previous: EntryStatus
    lane: int = 0


# Stand-ins for the two fields that differ from record to record; they cannot occur in the
# rest of a canonical record (the event id, time, action and actor are given, the data small).
_SEQ_MARK = 918_273_645_546_372_819
_TICKET_MARK = uuid.UUID("f1e2d3c4-b5a6-4978-8a6b-5c4d3e2f1a0b")


class RecordTemplate:
    """The canonical text of records that differ only in ``seq`` and ``ticket_id``: three
    pieces around them, taken from ``canonical_record`` itself."""

    def __init__(self, **fields: Any) -> None:
        self._fields = fields
        text = canonical_record(seq=_SEQ_MARK, ticket_id=_TICKET_MARK, **fields)
        seq_mark, ticket_mark = str(_SEQ_MARK), f'"{_TICKET_MARK}"'
        if text.count(seq_mark) != 1 or text.count(ticket_mark) != 1:
            raise ValueError("the record's fields hold a stand-in value")
        self._seq_first = text.index(seq_mark) < text.index(ticket_mark)
        first, second = (seq_mark, ticket_mark) if self._seq_first else (ticket_mark, seq_mark)
        head, rest = text.split(first)
        middle, tail = rest.split(second)
        self._pieces = (head, middle, tail)

    def text(self, seq: int, ticket_id: uuid.UUID) -> str:
        head, middle, tail = self._pieces
        ticket = f'"{ticket_id}"'
        if self._seq_first:
            return f"{head}{seq}{middle}{ticket}{tail}"
        return f"{head}{ticket}{middle}{seq}{tail}"

    def checked(self, seq: int, ticket_id: uuid.UUID) -> str:
        """``text``, compared with ``canonical_record`` (once a chunk: the two never part)."""
        text = self.text(seq, ticket_id)
        if text != canonical_record(seq=seq, ticket_id=ticket_id, **self._fields):
            raise RuntimeError("the bulk record template differs from the canonical form")
        return text


# Which entries a chunk takes. Fans waiting in order come first, by the partial index behind
# admission order (so their records follow the line, and revoked rows, gone from that index,
# are never scanned again); then the rest (the pre-queue, fans passed over while away). Rows
# another transaction holds are skipped, not waited for: two runs take disjoint chunks.
_IN_ORDER = (
    "event_id = %s AND status = 'waiting' AND passed_over_at IS NULL "
    "ORDER BY tier_id, order_key LIMIT %s FOR UPDATE SKIP LOCKED"
)
_THE_REST = "event_id = %s AND status = ANY(%s) LIMIT %s FOR UPDATE SKIP LOCKED"
# Given entries, each waited for: one held by another transaction is changing now, and what
# it becomes decides whether it still ends here.
_GIVEN = "id = ANY(%s) AND event_id = %s AND status = ANY(%s) FOR UPDATE"


def _moved_sql(chosen: str, assignments: list[str]) -> str:
    table = QueueEntry._meta.db_table
    return (
        f"UPDATE {table} AS e SET {', '.join(assignments)} "
        f"FROM (SELECT id, status FROM {table} WHERE {chosen}) AS before "
        "WHERE e.id = before.id "
        "RETURNING e.order_key, e.id, e.public_id::text, e.tier_id, before.status, e.lane"
    )


_COPY_RECORDS = (
    f"COPY {AuditRecord._meta.db_table} "
    "(event_id, seq, at, ticket_id, action, actor, data, prev_hash, hash) FROM STDIN"
)
_MOVE_HEAD = (
    f"UPDATE {AuditChainHead._meta.db_table} SET seq = %s, last_hash = %s WHERE event_id = %s"
)


def _copy_text(value: str) -> str:
    """``value`` as a field of COPY's text format."""
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


def entries_end_chunk(
    *,
    event_id: int,
    to: EntryStatus,
    expected: Sequence[EntryStatus],
    now: datetime,
    action: AuditAction,
    actor: str,
    data: Callable[[EntryStatus], Mapping[str, Any]],
    limit: int,
    ids: Sequence[int] | None = None,
) -> list[Ended]:
    """End up to ``limit`` of the event's entries still in one of ``expected`` (of ``ids``
    only, when given), each audited as ``action`` with ``data(previous status)``, in one
    transaction; the entries ended, in order-key order (as their records are). Fewer than
    ``limit`` without ``ids``: none were left but those another transaction held."""
    allowed = [s.value for s in expected if s in sources_of(to)]
    if not allowed:
        raise ValueError(f"no transition to {to} from {list(expected)}")
    assignments, params = ending_assignments(to, now)
    rows: list[tuple[Any, ...]] = []
    with transaction.atomic():
        # The entries first, then the chain head, as every audited change takes them.
        with connection.cursor() as cursor:

            def move(chosen: str, *arguments: Any) -> None:
                cursor.execute(_moved_sql(chosen, assignments), [*params, *arguments])
                rows.extend(cursor.fetchall())

            if ids is not None:
                if ids:
                    move(_GIVEN, list(ids), event_id, allowed)
            else:
                if EntryStatus.WAITING.value in allowed:
                    move(_IN_ORDER, event_id, limit)
                if len(rows) < limit:
                    move(_THE_REST, event_id, allowed, limit - len(rows))
        if not rows:
            return []
        rows.sort()
        head = audit_chain_lock(event_id=event_id)
        _audit_chunk(head, rows, now=now, action=action, actor=actor, data=data)
    return [
        Ended(
            id=row[1],
            public_id=uuid.UUID(row[2]),
            tier_id=row[3],
            order_key=row[0],
            previous=EntryStatus(row[4]),
            lane=row[5],
        )
        for row in rows
    ]


def _audit_chunk(
    head: AuditChainHead,
    rows: Sequence[tuple[Any, ...]],
    *,
    now: datetime,
    action: AuditAction,
    actor: str,
    data: Callable[[EntryStatus], Mapping[str, Any]],
) -> None:
    """The records of ``rows`` (order key, id, ticket id, tier id, previous status, lane), chained
    from ``head``, written with one COPY, and the head moved to the last."""
    event_id = head.event_id
    seq, prev_hash = head.seq, head.last_hash
    # Per previous status, the record's template and its data as COPY reads it: nothing else
    # differs from record to record but seq, the ticket and the two hashes.
    templates: dict[str, tuple[RecordTemplate, str]] = {}
    at = f"\t{now.isoformat()}\t"
    by = f"\t{action.value}\t{_copy_text(actor)}\t"
    lines = []
    for _, _, ticket, _, previous, _ in rows:
        seq += 1
        found = templates.get(previous)
        if found is None:
            record_data = dict(data(EntryStatus(previous)))
            template = RecordTemplate(
                event_id=event_id, at=now, action=action.value, actor=actor, data=record_data
            )
            found = templates[previous] = (template, _copy_text(canonical_json(record_data)))
            text = template.checked(seq, uuid.UUID(ticket))
        else:
            text = found[0].text(seq, ticket)
        record_hash = chain_hash(prev_hash, text)
        lines.append(f"{event_id}\t{seq}{at}{ticket}{by}{found[1]}\t{prev_hash}\t{record_hash}\n")
        prev_hash = record_hash
    with connection.cursor() as cursor:
        with cursor.cursor.copy(_COPY_RECORDS) as copy:
            copy.write("".join(lines))
        cursor.execute(_MOVE_HEAD, [seq, prev_hash, event_id])
    head.seq, head.last_hash = seq, prev_hash


def entries_end_all(
    *, limit: int, parallel: int, go_on: Callable[[], bool], **end: Any
) -> tuple[list[Ended], bool]:
    """``entries_end_chunk`` (its arguments in ``end``, without ``ids``) again and again,
    ``parallel`` chunks at a time, until none are left or ``go_on()`` says stop between
    rounds. The entries ended, and whether none were left. Chunks at once take disjoint
    entries (rows held are skipped) and queue for the chain head's lock in turn: one chunk's
    entries are updated while another's records are written. On this 2-core machine, where
    PostgreSQL shares the cores with the worker, two at a time were slower than one
    (docs/benchmarks-notes.md); with the database on a machine of its own they may not be."""
    ended: list[Ended] = []
    # Inside a caller's transaction, threads could not see its rows (and would wait on them).
    if parallel <= 1 or connection.in_atomic_block:
        while True:
            chunk = entries_end_chunk(limit=limit, **end)
            ended += chunk
            if len(chunk) < limit:
                return ended, True
            if not go_on():
                return ended, False

    @closes_old_connections
    def one_chunk(_: int) -> list[Ended]:
        return entries_end_chunk(limit=limit, **end)

    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="bulk-end") as threads:
        while True:
            chunks = list(threads.map(one_chunk, range(parallel)))
            for chunk in chunks:
                ended += chunk
            if any(len(chunk) < limit for chunk in chunks):
                return ended, True
            if not go_on():
                return ended, False
