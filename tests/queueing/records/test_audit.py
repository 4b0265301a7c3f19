import itertools

import pytest
from django.db import connection
from django.utils import timezone

from queueing.models import GENESIS_HASH, AuditRecord
from queueing.records.audit import record_hash
from queueing.records.audit_verify import audit_chain_verify
from staff.services import event_pause, event_resume, event_update
from tests.helpers import join, new_fan

pytestmark = pytest.mark.django_db


def make_history(event) -> None:
    fans = [new_fan() for _ in range(4)]
    tickets = [join(fan, event.slug).json()["ticket"] for fan in fans]
    fans[1].delete(f"/api/v1/tickets/{tickets[1]}")
    event_pause(event=event, actor="staff:ann", now=timezone.now())
    event_resume(event=event, actor="staff:ann", now=timezone.now())
    event_update(event=event, actor="staff:ann", now=timezone.now(), changes={"capacity": 7})


def test_the_records_of_an_event_chain_correctly(event) -> None:
    make_history(event)
    records = list(AuditRecord.objects.filter(event=event).order_by("seq"))
    assert [r.action for r in records] == [
        "event_created",
        "shuffled",
        "joined",
        "joined",
        "joined",
        "joined",
        "left",
        "event_paused",
        "event_resumed",
        "event_changed",
    ]
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert records[0].prev_hash == GENESIS_HASH
    for previous, record in itertools.pairwise(records):
        assert record.prev_hash == previous.hash
    assert all(record.hash == record_hash(record) for record in records)
    assert audit_chain_verify(event_id=event.id).ok


def test_chains_of_different_events_are_independent(make_event) -> None:
    first, second = make_event(slug="one"), make_event(slug="two")
    join(new_fan(), "one")
    join(new_fan(), "two")
    assert audit_chain_verify(event_id=first.id).ok
    assert audit_chain_verify(event_id=second.id).ok
    assert (
        AuditRecord.objects.filter(event=second).order_by("seq").first().prev_hash == GENESIS_HASH
    )


def test_editing_one_record_in_postgresql_is_caught_at_that_record(event) -> None:
    make_history(event)
    target = AuditRecord.objects.get(event=event, seq=4)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE queueing_auditrecord SET actor = 'someone-else' WHERE id = %s", [target.id]
        )
    verdict = audit_chain_verify(event_id=event.id)
    assert not verdict.ok
    assert verdict.first_bad_id == target.id


def test_deleting_a_record_is_caught(event) -> None:
    make_history(event)
    victim = AuditRecord.objects.get(event=event, seq=3)
    next_record = AuditRecord.objects.get(event=event, seq=4)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM queueing_auditrecord WHERE id = %s", [victim.id])
    verdict = audit_chain_verify(event_id=event.id)
    assert (verdict.ok, verdict.first_bad_id) == (False, next_record.id)


def test_truncating_the_end_of_the_chain_is_caught(event) -> None:
    make_history(event)
    last = AuditRecord.objects.filter(event=event).order_by("-seq").first()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM queueing_auditrecord WHERE id = %s", [last.id])
    assert not audit_chain_verify(event_id=event.id).ok


@pytest.mark.django_db(transaction=True)
def test_verification_during_a_live_sale_is_not_a_false_alarm(make_event, monkeypatch) -> None:
    import threading

    from queueing.records import audit_verify

    event = make_event(slug="live")
    for _ in range(3):
        join(new_fan(), event.slug)
    real = audit_verify.record_hash
    appended = []

    def hash_while_someone_joins(record):
        if not appended:
            appended.append(True)
            worker = threading.Thread(target=lambda: (join(new_fan(), "live"), connection.close()))
            worker.start()
            worker.join()
        return real(record)

    monkeypatch.setattr(audit_verify, "record_hash", hash_while_someone_joins)
    assert audit_chain_verify(event_id=event.id).ok
    monkeypatch.setattr(audit_verify, "record_hash", real)
    verdict = audit_chain_verify(event_id=event.id)
    assert verdict.ok and verdict.records == 6  # created, started, four joins


def test_a_check_goes_on_from_where_an_earlier_one_stopped(event) -> None:
    make_history(event)  # ten records
    first = audit_chain_verify(event_id=event.id, limit=4)
    assert (first.ok, first.complete, first.records, first.checked_seq) == (True, False, 4, 4)
    assert first.checked_hash == AuditRecord.objects.get(event=event, seq=4).hash
    rest = audit_chain_verify(
        event_id=event.id, after_seq=first.checked_seq, after_hash=first.checked_hash
    )
    assert (rest.ok, rest.complete, rest.records, rest.checked_seq, rest.head_seq) == (
        True,
        True,
        6,
        10,
        10,
    )
    # Records before the point gone on from are not read again...
    target = AuditRecord.objects.get(event=event, seq=2)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE queueing_auditrecord SET actor = 'x' WHERE id = %s", [target.id])
    assert audit_chain_verify(event_id=event.id, after_seq=4, after_hash=first.checked_hash).ok
    # ... but that point itself must be as it was: its contents...
    anchor = AuditRecord.objects.get(event=event, seq=4)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE queueing_auditrecord SET actor = 'x' WHERE id = %s", [anchor.id])
    verdict = audit_chain_verify(event_id=event.id, after_seq=4, after_hash=first.checked_hash)
    assert (verdict.ok, verdict.first_bad_id, verdict.first_bad_seq) == (False, anchor.id, 4)
    # ... and its hash.
    AuditRecord.objects.filter(pk=anchor.pk).update(actor=anchor.actor, hash="e" * 64)
    verdict = audit_chain_verify(event_id=event.id, after_seq=4, after_hash=first.checked_hash)
    assert (verdict.ok, verdict.first_bad_id, verdict.first_bad_seq) == (False, anchor.id, 4)
    assert verdict.problem == "seq 4 changed since it was last checked"


def test_a_verdict_says_where_and_what_failed(event) -> None:
    make_history(event)
    victim = AuditRecord.objects.get(event=event, seq=6)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM queueing_auditrecord WHERE id = %s", [victim.id])
    verdict = audit_chain_verify(event_id=event.id)
    assert (verdict.first_bad_seq, verdict.checked_seq) == (7, 5)
    assert verdict.problem == "seq 7 where seq 6 was due"
