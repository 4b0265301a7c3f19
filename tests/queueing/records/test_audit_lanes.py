"""An on-sale's trail split into lanes: a chain and a head per lane, the root chain for the
on-sale's own records, and appends to different lanes that do not wait for each other."""

import itertools
import threading
import uuid
from datetime import UTC

import pytest
from django.db import connection, transaction
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from queueing.models import GENESIS_HASH, AuditAction, AuditLaneHead, AuditRecord
from queueing.records.audit import (
    ROOT_ONLY,
    AuditItem,
    audit_append,
    audit_append_many,
    audit_chain_lock,
    audit_chains_lock,
    audit_frames,
    audit_lane_heads_ensure,
    canonical_json,
    canonical_record,
    record_hash,
)
from queueing.records.audit_verify import audit_chain_verify

pytestmark = pytest.mark.django_db


def joined(count: int) -> list[AuditItem]:
    return [
        AuditItem(action=AuditAction.JOINED, ticket_id=uuid.uuid4(), data={"n": n})
        for n in range(count)
    ]


def test_each_lane_is_a_chain_of_its_own_from_seq_1(event) -> None:
    audit_lane_heads_ensure(event_id=event.id, lanes=3)
    now = timezone.now()
    with transaction.atomic():
        audit_append_many(event_id=event.id, actor="fan", at=now, items=joined(2), lane=0)
        audit_append_many(event_id=event.id, actor="fan", at=now, items=joined(3), lane=2)
    for lane, count in ((0, 2), (1, 0), (2, 3)):
        records = list(AuditRecord.objects.filter(event=event, lane=lane).order_by("seq"))
        assert [r.seq for r in records] == list(range(1, count + 1))
        if records:
            assert records[0].prev_hash == GENESIS_HASH
        for previous, record in itertools.pairwise(records):
            assert record.prev_hash == previous.hash
        assert all(r.hash == record_hash(r) for r in records)
        head = AuditLaneHead.objects.get(event=event, lane=lane)
        assert (head.seq, head.last_hash) == (
            (count, records[-1].hash) if records else (0, GENESIS_HASH)
        )
        assert audit_chain_verify(event_id=event.id, lane=lane).ok
    # The root chain (created, started) is untouched by the lanes.
    assert audit_chain_verify(event_id=event.id).records == 2


def test_a_lane_is_hashed_under_the_key_lane_and_no_lane_leaves_the_key_out() -> None:
    fields = {
        "event_id": 7,
        "seq": 1,
        "at": timezone.now(),
        "ticket_id": None,
        "action": "joined",
        "actor": "fan",
        "data": {},
    }
    assert '"lane"' not in canonical_record(**fields)
    assert '"lane":3,' in canonical_record(**fields, lane=3)
    assert canonical_record(**fields, lane=None) == canonical_record(**fields)


def test_records_of_the_on_sale_and_of_admission_go_in_no_lane(event) -> None:
    audit_lane_heads_ensure(event_id=event.id, lanes=2)
    for action in (AuditAction.ADMITTED, AuditAction.EVENT_CHANGED, AuditAction.ROOT):
        with pytest.raises(ValueError), transaction.atomic():
            audit_append(event_id=event.id, action=action, actor="x", at=timezone.now(), lane=1)


def test_a_head_handed_over_must_be_the_lanes(event) -> None:
    audit_lane_heads_ensure(event_id=event.id, lanes=2)
    with pytest.raises(ValueError), transaction.atomic():
        head = audit_chain_lock(event_id=event.id, lane=1)
        audit_append_many(
            event_id=event.id, actor="fan", at=timezone.now(), items=joined(1), locked_head=head
        )


def test_lane_heads_are_made_once_and_the_empty_surplus_removed(event) -> None:
    audit_lane_heads_ensure(event_id=event.id, lanes=4)
    audit_lane_heads_ensure(event_id=event.id, lanes=4)
    assert sorted(AuditLaneHead.objects.filter(event=event).values_list("lane", flat=True)) == [
        0,
        1,
        2,
        3,
    ]
    audit_lane_heads_ensure(event_id=event.id, lanes=2)
    assert AuditLaneHead.objects.filter(event=event).count() == 2
    audit_lane_heads_ensure(event_id=event.id, lanes=1)
    assert not AuditLaneHead.objects.filter(event=event).exists()


def test_locking_every_chain_takes_the_lanes_in_order_then_the_root(event) -> None:
    audit_lane_heads_ensure(event_id=event.id, lanes=3)
    with transaction.atomic():
        heads = audit_chains_lock(event_id=event.id)
    assert [head.lane for head in heads] == [0, 1, 2, None]


@pytest.mark.django_db(transaction=True)
def test_appends_to_two_lanes_do_not_wait_for_each_other(make_event) -> None:
    event = make_event(slug="lanes")
    audit_lane_heads_ensure(event_id=event.id, lanes=2)
    appended = threading.Event()
    failures: list[BaseException] = []

    def append_to_lane_1() -> None:
        try:
            with transaction.atomic():
                # A lock wait would fail at once rather than hang the test.
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL lock_timeout = '2s'")
                audit_append_many(
                    event_id=event.id, actor="fan", at=timezone.now(), items=joined(2), lane=1
                )
            appended.set()
        except BaseException as failure:  # noqa: BLE001  reported by the test below
            failures.append(failure)
        finally:
            connection.close()

    with transaction.atomic():
        audit_append_many(
            event_id=event.id, actor="fan", at=timezone.now(), items=joined(1), lane=0
        )
        # Lane 0's head stays locked while another connection appends to lane 1.
        worker = threading.Thread(target=append_to_lane_1)
        worker.start()
        worker.join(timeout=30)
        assert not failures, failures
        assert appended.is_set()
    assert AuditLaneHead.objects.get(event=event, lane=1).seq == 2
    assert audit_chain_verify(event_id=event.id, lane=0).ok
    assert audit_chain_verify(event_id=event.id, lane=1).ok


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    actor=st.text(),
    action=st.sampled_from(list(AuditAction)),
    ticket=st.none() | st.uuids(),
    data=st.dictionaries(st.text(), json_values, max_size=4),
    lane=st.none() | st.integers(min_value=0, max_value=63),
    seq=st.integers(min_value=1, max_value=2**62),
    event_id=st.integers(min_value=1, max_value=2**62),
    at=st.datetimes(timezones=st.just(UTC)),
)
def test_a_record_framed_before_the_lock_is_its_canonical_json(
    actor, action, ticket, data, lane, seq, event_id, at
) -> None:
    """What the chain head's holder hashes (``audit_frames``) is byte for byte the canonical
    form docs/api.md states (``canonical_record``)."""
    if lane is not None and action in ROOT_ONLY:
        lane = None
    (frame,) = audit_frames(
        event_id=event_id,
        actor=actor,
        at=at,
        items=[AuditItem(action=action, ticket_id=ticket, data=data)],
        lane=lane,
    )
    assert frame.canonical(seq=seq, data=canonical_json(frame.data)) == canonical_record(
        event_id=event_id,
        seq=seq,
        at=at,
        ticket_id=ticket,
        action=action,
        actor=actor,
        data=data,
        lane=lane,
    )
