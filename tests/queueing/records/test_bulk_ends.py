"""Entries ended in bulk (records/bulk_ends.py): each with exactly one record, chained as one
at a time would chain them, in chunks that stand on their own."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
from django.utils import timezone

from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.records.audit import canonical_record
from queueing.records.audit_verify import audit_chain_verify
from queueing.records.bulk_ends import RecordTemplate, entries_end_all, entries_end_chunk
from queueing.rules.states import QUEUED, EntryStatus
from tests.helpers import waiting_entries

pytestmark = pytest.mark.django_db


def _revoke(event, **more):
    return dict(
        event_id=event.id,
        to=EntryStatus.REVOKED,
        expected=QUEUED,
        now=timezone.now(),
        action=AuditAction.REVOKED,
        actor="system:schedule",
        data=lambda previous: {"reason": "closed", "from": previous},
        **more,
    )


def test_the_template_writes_the_canonical_form_byte_for_byte() -> None:
    now = timezone.now()
    fields = dict(
        event_id=7,
        at=now,
        action="revoked",
        actor='staff:Zoë "\\t"',
        data={"reason": "fermé\n", "from": "waiting", "n": [1, 2]},
    )
    template = RecordTemplate(**fields)
    for seq, ticket in ((1, uuid.uuid4()), (10**12, uuid.uuid4())):
        assert template.text(seq, ticket) == canonical_record(seq=seq, ticket_id=ticket, **fields)
        assert template.text(seq, str(ticket)) == template.checked(seq, ticket)


def test_a_chunk_ends_at_most_its_limit_in_line_order_each_with_one_record(event) -> None:
    waiting_entries(event, event.tiers.get(), 12)
    ended = entries_end_chunk(**_revoke(event), limit=5)
    assert len(ended) == 5
    keys = list(
        QueueEntry.objects.filter(event=event).order_by("order_key").values_list("id", flat=True)
    )
    assert [e.id for e in ended] == keys[:5]
    records = list(AuditRecord.objects.filter(event=event, action="revoked").order_by("seq"))
    assert [r.ticket_id for r in records] == [e.public_id for e in ended]
    assert records[0].data == {"reason": "closed", "from": "waiting"}
    assert audit_chain_verify(event_id=event.id).ok


def test_ending_everyone_in_chunks_is_complete_and_verifies(event) -> None:
    tier = event.tiers.get()
    waiting_entries(event, tier, 23)
    QueueEntry.objects.filter(event=event, identity__in=["fan1", "fan2"]).update(status="prequeue")
    rounds = []
    ended, none_left = entries_end_all(
        **_revoke(event), limit=4, parallel=2, go_on=lambda: rounds.append(1) or True
    )
    assert none_left and len(ended) == 23
    assert len(rounds) == 5  # chunks of 4, one at a time in the test's transaction
    assert set(QueueEntry.objects.filter(event=event).values_list("status", flat=True)) == {
        "revoked"
    }
    by_ticket = Counter(
        AuditRecord.objects.filter(event=event, action="revoked").values_list(
            "ticket_id", flat=True
        )
    )
    assert set(by_ticket.values()) == {1} and len(by_ticket) == 23
    froms = Counter(
        r.data["from"] for r in AuditRecord.objects.filter(event=event, action="revoked")
    )
    assert froms == {"waiting": 21, "prequeue": 2}
    verdict = audit_chain_verify(event_id=event.id)
    assert verdict.ok and verdict.complete


def test_going_on_stops_when_told_and_a_later_run_finishes_without_duplicates(event) -> None:
    waiting_entries(event, event.tiers.get(), 10)
    first, none_left = entries_end_all(**_revoke(event), limit=3, parallel=1, go_on=lambda: False)
    assert (len(first), none_left) == (3, False)
    rest, none_left = entries_end_all(**_revoke(event), limit=3, parallel=1, go_on=lambda: True)
    assert (len(rest), none_left) == (7, True)
    assert AuditRecord.objects.filter(event=event, action="revoked").count() == 10
    assert audit_chain_verify(event_id=event.id).ok


def test_given_ids_end_only_those_still_in_line(event) -> None:
    waiting_entries(event, event.tiers.get(), 6)
    ids = list(QueueEntry.objects.filter(event=event).order_by("id").values_list("id", flat=True))
    QueueEntry.objects.filter(pk=ids[0]).update(
        status="admitted", admitted_at=timezone.now(), status_changed_at=timezone.now()
    )
    ended = entries_end_chunk(**_revoke(event), limit=100, ids=ids[:3])
    assert sorted(e.id for e in ended) == ids[1:3]
    assert QueueEntry.objects.get(pk=ids[0]).status == "admitted"
    assert QueueEntry.objects.filter(event=event, status="waiting").count() == 3
