"""Writing queue entries in PostgreSQL: inserted in bulk (their order keys drawn in the order
given), the return URL a fan's latest join brought, and re-entry's compare-and-set. Their
reads are in entry_reads.py.

Order keys and commits. Keys come from one sequence, but the transactions that draw them
commit in their own order, so a key can become visible after a larger one: were admission to
let in the larger one meanwhile, the smaller one's fan would be passed by. Every insert of
entries therefore draws its keys holding the on-sale's order-key lock *shared* until its
commit (``order_keys_drawing``), and admission asks for the keys that are settled
(``order_keys_settled``): it takes the lock alone, in a transaction of its own, which waits
for every transaction still drawing or committing keys, reads the sequence, and ends. Every
key up to that value is committed or gone, and admission takes no fan beyond it. So no join
needs to draw its keys under its chain head's lock, and joins to different chains (lanes)
need not commit in key order.

A random line (``Event.queue_order``) brings its own keys, place keys (rules/shuffle.py), which
no sequence draws: the entry ids, drawn by the same inserts under the same lock, bound whom
admission takes instead (``Settled.entry_id``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from queueing.models import ORDER_KEY_SEQUENCE, QueueEntry
from queueing.records.bulk_insert import insert_rows
from queueing.rules.states import LIVE, REENTERABLE, REENTRY_TO

# First key of the two-int advisory lock over an on-sale's order keys; the second is its id.
ORDER_KEYS_LOCK_NAMESPACE = 0x574B
# Entry ids are drawn by the same inserts under the same lock: in a random line, where order
# keys are place keys (rules/shuffle.py), the settled id bounds the entries committed before.
_SETTLED = (
    f"SELECT (SELECT last_value FROM {ORDER_KEY_SEQUENCE}), "
    f"(SELECT last_value FROM {QueueEntry._meta.db_table}_id_seq)"
)


def order_keys_drawing(event_id: int) -> None:
    """Before inserting entries of ``event_id``: the order-key lock, shared with the other
    inserts and held until the transaction ends. Take it before any chain head's lock (every
    insert does), or a head's holder could wait behind ``order_keys_settled`` while that
    waits for a transaction that waits for the head."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock_shared(%s, %s)", [ORDER_KEYS_LOCK_NAMESPACE, event_id]
        )


@dataclass(frozen=True)
class Settled:
    order_key: int
    entry_id: int


def order_keys_settled(event_id: int) -> Settled:
    """The largest order key up to which every key of ``event_id``'s entries is committed or
    rolled back, and the largest entry id likewise (a random line's bound: its keys are place
    keys, not drawn in order). Waits for the inserts of its entries in flight to end (new
    ones wait behind it meanwhile). Called outside a transaction, it is a transaction of its
    own and holds nothing when it returns; inside one, the lock lasts as long as that."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)", [ORDER_KEYS_LOCK_NAMESPACE, event_id]
        )
        cursor.execute(_SETTLED)
        order_key, entry_id = cursor.fetchone()
        return Settled(order_key=int(order_key), entry_id=int(entry_id))


# The partial unique index behind "one live ticket per identity and on-sale" (models.py).
LIVE_IDENTITY_CONSTRAINT = "one_live_entry_per_identity"

# Every column a new entry is given; the rest are NULL or database defaults (the order key).
# tests/queueing/line/test_join_batches.py fails when QueueEntry gains a column this misses.
NEW_ENTRY_FIELDS = (
    "public_id",
    "event",
    "tier",
    "identity",
    "address",
    "status",
    "joined_at",
    "status_changed_at",
    "quoted_p10",
    "quoted_p50",
    "quoted_p90",
    "return_url",
    "lane",
    "join_request_id",
)


def entries_insert(entries: Sequence[QueueEntry], *, checked_now: bool = False) -> None:
    """Insert unsaved entries with one statement; each gets its id and order key, which
    follow the order of ``entries`` (unless every entry brings its own key: a random line's
    place keys). Their on-sale's ``order_keys_drawing`` comes first.
    ``checked_now``: their foreign keys are checked by the insert rather than at the commit,
    as every later statement's of the transaction: a join inserting before it takes the
    chain head's lock does not leave their checks to the commit, under the lock."""
    if checked_now:
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    # An on-sale in random order gives its entries their place keys (rules/shuffle.py):
    # then they are the order keys, and the sequence draws none.
    placed = bool(entries) and all(isinstance(entry.order_key, int) for entry in entries)
    inserted = insert_rows(
        QueueEntry,
        (*NEW_ENTRY_FIELDS, "order_key") if placed else NEW_ENTRY_FIELDS,
        [
            [
                entry.public_id,
                entry.event_id,
                entry.tier_id,
                entry.identity,
                entry.address,
                entry.status,
                entry.joined_at,
                entry.status_changed_at,
                entry.quoted_p10,
                entry.quoted_p50,
                entry.quoted_p90,
                entry.return_url,
                entry.lane,
                entry.join_request_id,
                *([entry.order_key] if placed else []),
            ]
            for entry in entries
        ],
        returning=("public_id", "id", "order_key"),
    )
    by_public_id = {public_id: (pk, order_key) for public_id, pk, order_key in inserted}
    for entry in entries:
        entry.id, entry.order_key = by_public_id[entry.public_id]
        entry._state.adding = False


def entries_return_url_update(return_urls: Mapping[int, str]) -> None:
    """Give live entries (by id) the return URL their fan's latest join brought, in one
    statement. An entry that ended meanwhile keeps its own: the link of a finished visit is
    history, and a re-entry goes back to where that visit started."""
    if not return_urls:
        return
    table = QueueEntry._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS e SET return_url = v.return_url "
            "FROM unnest(%s::bigint[], %s::varchar[]) AS v(id, return_url) "
            "WHERE e.id = v.id AND e.status = ANY(%s)",
            [list(return_urls), list(return_urls.values()), [s.value for s in LIVE]],
        )


def is_live_identity_conflict(exc: IntegrityError) -> bool:
    """The write was refused because this identity already holds a live ticket."""
    diag = getattr(exc.__cause__, "diag", None)
    return getattr(diag, "constraint_name", None) == LIVE_IDENTITY_CONSTRAINT


# ------------------------------------------------------------------------ re-entry


@dataclass(frozen=True)
class Reentered:
    id: int
    public_id: uuid.UUID
    tier_id: int
    order_key: int
    lane: int = 0


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
            "RETURNING id, public_id, tier_id, order_key, lane",
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
    return Reentered(id=row[0], public_id=row[1], tier_id=row[2], order_key=row[3], lane=row[4])
