"""After a restore: the ids the room hands to outsiders move past every id the lost interval
may have used.

A restored database's sequences are where they were at the backup point, so the room would
hand out again the ids it had handed out between the backup and the failure. Two of them
reach outsiders:

- **Entry ids** are sealed in tickets (rules/ticket_codec.py), deterministically: a new fan
  given the id of a fan whose join was lost would get *that fan's ticket*, byte for byte, and
  the lost fan's browser, still polling with it, would see the new fan's place and take the
  new fan's pass.
- **Audit record ids** are the auditors' export cursor (docs/api.md, "Auditors"): an auditor
  who had read up to a lost record's id would skip the new records below it.

So before the restored room serves anyone, both sequences jump ahead by a gap larger than any
number of ids the lost interval can have drawn. Order keys need no jump: they only order the
line, and no outsider holds one.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Model

from queueing.models import AuditRecord, QueueEntry

# A billion joins (or audit records) between the backup point and the failure would be more
# than any on-sale takes; ids are 64-bit, so thousands of restores still fit.
DEFAULT_GAP = 1_000_000_000

HANDED_OUT: tuple[type[Model], ...] = (QueueEntry, AuditRecord)


@dataclass(frozen=True)
class Skipped:
    table: str
    before: int  # the sequence's last value as restored (0: never drawn)
    after: int  # the last value now: the next id drawn is one more


def sequences_skip_ahead(*, gap: int = DEFAULT_GAP) -> list[Skipped]:
    """Move the id sequence of every table in ``HANDED_OUT`` ``gap`` past the larger of its
    last value and the table's largest id. Run once on a restored database, before the room
    starts; running it again only moves further."""
    if gap < 1:
        raise ValueError("gap must be at least 1")
    skipped = []
    with transaction.atomic(), connection.cursor() as cursor:
        for model in HANDED_OUT:
            table = model._meta.db_table
            cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
            (sequence,) = cursor.fetchone()
            # The largest id too: a sequence restored behind its table (a dump edited by
            # hand, a partial restore) must not hand out ids that are there already.
            cursor.execute(
                f"SELECT CASE WHEN is_called THEN last_value ELSE 0 END,"
                f" (SELECT coalesce(max(id), 0) FROM {connection.ops.quote_name(table)})"
                f" FROM {sequence}"
            )
            last, largest = cursor.fetchone()
            after = max(last, largest) + gap
            cursor.execute("SELECT setval(%s, %s, true)", [sequence, after])
            skipped.append(Skipped(table=table, before=last, after=after))
    return skipped
