"""After a restore (records/sequences.py): new entries and audit records get ids past every
id the lost interval may have handed out."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from queueing.models import AuditRecord, QueueEntry
from queueing.records.sequences import sequences_skip_ahead
from tests.helpers import entry_of, fans_join

pytestmark = pytest.mark.django_db(transaction=True)


def _largest(model) -> int:
    return model.objects.order_by("-id").values_list("id", flat=True).first()


def test_new_entries_and_records_come_after_the_gap(event) -> None:
    fans_join(event.slug, 2)
    entries, records = _largest(QueueEntry), _largest(AuditRecord)
    skipped = sequences_skip_ahead(gap=1000)
    assert [s.table for s in skipped] == ["queueing_queueentry", "queueing_auditrecord"]
    (ticket,) = fans_join(event.slug, 1)
    assert entry_of(ticket).id == entries + 1001
    assert AuditRecord.objects.order_by("-id").first().id == records + 1001


def test_a_sequence_behind_its_table_still_ends_past_its_largest_id(event) -> None:
    fans_join(event.slug, 3)
    largest = _largest(QueueEntry)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('queueing_queueentry', 'id'), 1)")
    (entries, _) = sequences_skip_ahead(gap=10)
    assert (entries.before, entries.after) == (1, largest + 10)


def test_the_command_says_where_the_ids_went(event, capsys) -> None:
    call_command("restore_skip_ids", "--gap", "50")
    out = capsys.readouterr().out
    assert "queueing_queueentry: ids went from" in out and "queueing_auditrecord" in out
    with pytest.raises(ValueError):
        sequences_skip_ahead(gap=0)
