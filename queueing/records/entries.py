"""Inserting new queue entries in bulk, their order keys drawn in the order given."""

from __future__ import annotations

from collections.abc import Sequence

from queueing.models import QueueEntry
from queueing.records.bulk_insert import insert_rows

# Every column a new entry is given; the rest are NULL or database defaults (the order key).
# tests/queueing/test_join_batches.py fails when QueueEntry gains a column this misses.
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
)


def entries_insert(entries: Sequence[QueueEntry]) -> None:
    """Insert unsaved entries with one statement; each gets its id and order key, which
    follow the order of ``entries``."""
    inserted = insert_rows(
        QueueEntry,
        NEW_ENTRY_FIELDS,
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
            ]
            for entry in entries
        ],
        returning=("public_id", "id", "order_key"),
    )
    by_public_id = {public_id: (pk, order_key) for public_id, pk, order_key in inserted}
    for entry in entries:
        entry.id, entry.order_key = by_public_id[entry.public_id]
        entry._state.adding = False
