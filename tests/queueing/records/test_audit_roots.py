"""Root records: the tick commits to every lane's head when the lanes moved, and a check of
the whole on-sale holds each root to the lanes' records."""

import uuid

import pytest
from django.db import connection, transaction
from django.utils import timezone

from queueing.beat import event_beat
from queueing.models import GENESIS_HASH, AuditAction, AuditChainHead, AuditRecord
from queueing.records.audit import (
    AuditItem,
    audit_append_many,
    audit_lane_heads_ensure,
    record_hash,
)
from queueing.records.audit_roots import audit_root_write
from queueing.records.audit_verify import Progress, audit_event_verify
from queueing.rules.merkle import LaneHead, merkle_root

pytestmark = pytest.mark.django_db


def lanes_join(event, counts: dict[int, int]) -> None:
    """``counts[lane]`` joined records appended to each lane, a transaction per lane."""
    for lane, count in counts.items():
        with transaction.atomic():
            audit_append_many(
                event_id=event.id,
                actor="fan",
                at=timezone.now(),
                lane=lane,
                items=[
                    AuditItem(action=AuditAction.JOINED, ticket_id=uuid.uuid4(), data={"n": n})
                    for n in range(count)
                ],
            )


def roots(event) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(event=event, action=AuditAction.ROOT).order_by("seq"))


def laned(make_event, lanes: int = 3, slug: str = "laned"):
    event = make_event(slug=slug, lanes=lanes)
    audit_lane_heads_ensure(event_id=event.id, lanes=lanes)
    return event


def test_the_tick_commits_to_every_lanes_head_when_they_moved(make_event) -> None:
    event = laned(make_event)
    event_beat(event_id=event.id, now=timezone.now())
    assert roots(event) == []  # nothing in any lane yet
    lanes_join(event, {0: 2, 2: 1})
    event_beat(event_id=event.id, now=timezone.now())
    (root,) = roots(event)
    assert root.lane is None and root.actor == "system:audit" and root.ticket_id is None
    last = {
        lane: AuditRecord.objects.filter(event=event, lane=lane).order_by("-seq").first()
        for lane in (0, 2)
    }
    heads = [
        LaneHead(lane=0, seq=2, hash=last[0].hash),
        LaneHead(lane=1, seq=0, hash=GENESIS_HASH),
        LaneHead(lane=2, seq=1, hash=last[2].hash),
    ]
    assert root.data == {
        "lanes": [{"lane": h.lane, "seq": h.seq, "hash": h.hash} for h in heads],
        "merkle_root": merkle_root(heads),
    }
    assert AuditChainHead.objects.get(event=event).rooted == merkle_root(heads)
    event_beat(event_id=event.id, now=timezone.now())
    assert len(roots(event)) == 1  # no lane moved: no root
    lanes_join(event, {1: 1})
    event_beat(event_id=event.id, now=timezone.now())
    assert [r.data["lanes"][1]["seq"] for r in roots(event)] == [0, 1]
    assert audit_event_verify(event_id=event.id).ok


def test_a_tick_with_no_lane_moved_costs_one_query(make_event, django_assert_num_queries):
    event = laned(make_event)
    lanes_join(event, {0: 1})
    assert audit_root_write(event_id=event.id, now=timezone.now()) is not None
    with django_assert_num_queries(1):
        assert audit_root_write(event_id=event.id, now=timezone.now()) is None


def test_an_on_sale_without_lanes_gets_no_root_for_one_query(event, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert audit_root_write(event_id=event.id, now=timezone.now()) is None


def history(make_event):
    """Two roots over three lanes, and records after the last root."""
    event = laned(make_event)
    lanes_join(event, {0: 3, 1: 2})
    audit_root_write(event_id=event.id, now=timezone.now())
    lanes_join(event, {1: 1, 2: 2})
    audit_root_write(event_id=event.id, now=timezone.now())
    lanes_join(event, {0: 1})
    return event


def sql(statement: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def rechain_from(record: AuditRecord) -> None:
    """What a forger who can write the database does after editing ``record``: every hash of
    its chain recomputed from it on, the head moved along, so that the chain itself holds."""
    records = AuditRecord.objects.filter(
        event_id=record.event_id, lane=record.lane, seq__gte=record.seq
    ).order_by("seq")
    prev_hash = record.prev_hash
    for each in records:
        each.prev_hash = prev_hash
        each.hash = record_hash(each)
        each.save(update_fields=["prev_hash", "hash"])
        prev_hash = each.hash
    assert record.lane is None
    AuditChainHead.objects.filter(event_id=record.event_id).update(last_hash=prev_hash)


def test_a_whole_on_sale_with_lanes_verifies(make_event) -> None:
    event = history(make_event)
    verdict = audit_event_verify(event_id=event.id)
    assert verdict.ok and verdict.complete and verdict.problem == ""
    assert verdict.roots_checked == 2
    assert {lane: v.records for lane, v in verdict.lanes.items()} == {0: 4, 1: 3, 2: 2}
    assert verdict.records == verdict.root.records + 9


def test_a_lanes_record_edited_is_named_with_its_lane(make_event) -> None:
    event = history(make_event)
    target = AuditRecord.objects.get(event=event, lane=1, seq=2)
    sql("UPDATE queueing_auditrecord SET actor = 'x' WHERE id = %s", [target.id])
    verdict = audit_event_verify(event_id=event.id)
    assert (verdict.ok, verdict.bad_lane, verdict.first_bad_id) == (False, 1, target.id)
    assert verdict.problem == "lane 1: its hash does not match its contents"


def test_a_lanes_tail_deleted_is_caught(make_event) -> None:
    event = history(make_event)
    sql("DELETE FROM queueing_auditrecord WHERE event_id = %s AND lane = 0 AND seq = 4", [event.id])
    verdict = audit_event_verify(event_id=event.id)
    assert (verdict.ok, verdict.bad_lane) == (False, 0)
    assert "records missing at the end" in verdict.problem


def test_a_lanes_tail_deleted_with_its_head_moved_back_is_caught_by_the_root(make_event):
    event = history(make_event)
    # Lane 2's two records and its head rewound: the lane alone looks intact (and empty).
    sql("DELETE FROM queueing_auditrecord WHERE event_id = %s AND lane = 2", [event.id])
    sql(
        "UPDATE queueing_auditlanehead SET seq = 0, last_hash = %s"
        " WHERE event_id = %s AND lane = 2",
        [GENESIS_HASH, event.id],
    )
    verdict = audit_event_verify(event_id=event.id)
    assert not verdict.ok and verdict.lanes[2].ok
    second = roots(event)[1]
    assert (verdict.bad_lane, verdict.first_bad_id) == (None, second.id)
    assert verdict.problem == (
        f"the root chain: the root record at seq {second.seq}: it lists lane 2 at seq 2,"
        " which is not there"
    )


def test_a_forged_root_is_caught_though_its_chain_was_rehashed(make_event) -> None:
    event = history(make_event)
    first = roots(event)[0]
    first.data["merkle_root"] = "f" * 64
    first.save(update_fields=["data"])
    rechain_from(first)
    verdict = audit_event_verify(event_id=event.id)
    assert verdict.root.ok and not verdict.ok
    assert verdict.first_bad_id == first.id
    assert verdict.problem.endswith("its merkle_root is not the root over the heads it lists")


def test_a_root_listing_another_hash_is_caught(make_event) -> None:
    event = history(make_event)
    second = roots(event)[1]
    heads = [LaneHead(**head) for head in second.data["lanes"]]
    heads[0] = LaneHead(lane=0, seq=heads[0].seq, hash="e" * 64)
    second.data = {
        "lanes": [{"lane": h.lane, "seq": h.seq, "hash": h.hash} for h in heads],
        "merkle_root": merkle_root(heads),
    }
    second.save(update_fields=["data"])
    rechain_from(second)
    verdict = audit_event_verify(event_id=event.id)
    assert (verdict.ok, verdict.first_bad_id) == (False, second.id)
    assert verdict.problem.endswith("the hash it lists for lane 0 at seq 3 is not that record's")


def test_a_check_goes_on_from_where_each_chain_stopped(make_event) -> None:
    event = history(make_event)
    first = audit_event_verify(event_id=event.id, limit=4)
    assert first.ok and not first.complete
    after = {None: Progress(first.root.checked_seq, first.root.checked_hash)} | {
        lane: Progress(v.checked_seq, v.checked_hash) for lane, v in first.lanes.items()
    }
    rest = audit_event_verify(event_id=event.id, after=after)
    assert rest.ok and rest.complete
    assert first.records + rest.records == audit_event_verify(event_id=event.id).records


def test_the_tick_of_an_on_sale_without_lanes_asks_nothing_of_roots(make_event, monkeypatch):
    from queueing import beat

    asked: list[int] = []
    monkeypatch.setattr(beat, "audit_root_write", lambda **how: asked.append(how["event_id"]))
    one, several = make_event(slug="one", lanes=1), make_event(slug="several", lanes=3)
    for event in (one, several):
        event_beat(event_id=event.id, now=timezone.now())
    assert asked == [several.id]
