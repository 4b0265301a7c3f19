"""Group commit: a batch of joins gets exactly the answers the same joins one by one would."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from queueing.line import index_sync, joining
from queueing.line.joining import JoinRequest, JoinResult, entry_join_many
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from queueing.rules.errors import EventClosed, InvalidAccessCode, QueueFull
from queueing.web.api_errors import api_error
from staff.services import TierSpec


class _UnreachableManager:
    """A manager whose every query fails as an unreachable PostgreSQL would."""

    def __getattr__(self, name: str) -> Any:
        from django.db import OperationalError

        raise OperationalError("server closed the connection")


class _UnreachableModel:
    objects = _UnreachableManager()


def _requests(event: Any, identities: list[str], **fields: Any) -> list[JoinRequest]:
    return [
        JoinRequest(event=event, identity=i, access_code=None, now=timezone.now(), **fields)
        for i in identities
    ]


def test_a_batch_joins_in_order_under_one_chain_extension(make_event) -> None:
    event = make_event(capacity=0)
    outcomes = entry_join_many(_requests(event, [f"fan-{i}" for i in range(5)]))
    assert all(isinstance(o, JoinResult) and o.created for o in outcomes)
    assert [o.answer.position for o in outcomes] == [1, 2, 3, 4, 5]
    entries = list(QueueEntry.objects.order_by("order_key"))
    assert [e.identity for e in entries] == [f"fan-{i}" for i in range(5)]
    joined = AuditRecord.objects.filter(action="joined").order_by("seq")
    assert [r.data["order_key"] for r in joined] == [e.order_key for e in entries]
    assert audit_chain_verify(event_id=event.id).ok


def test_the_same_fan_twice_in_a_batch_gets_one_ticket(make_event) -> None:
    event = make_event(capacity=0)
    first, _, again = entry_join_many(_requests(event, ["a", "b", "a"]))
    assert isinstance(first, JoinResult) and isinstance(again, JoinResult)
    assert (first.created, again.created) == (True, False)
    assert again.answer.ticket == first.answer.ticket
    assert QueueEntry.objects.count() == 2


def test_a_full_line_refuses_the_rest_of_a_batch(make_event) -> None:
    event = make_event(capacity=0, max_queue_length=3)
    outcomes = entry_join_many(_requests(event, [f"fan-{i}" for i in range(5)]))
    assert [isinstance(o, JoinResult) for o in outcomes] == [True, True, True, False, False]
    refused = outcomes[3]
    assert isinstance(refused, QueueFull) and api_error(refused).status == 429
    assert refused.code == "queue_full"
    assert QueueEntry.objects.count() == 3


def test_refusals_are_per_fan_and_per_event(make_event) -> None:
    from staff.services import event_close

    open_sale = make_event(slug="open", capacity=0)
    closed = make_event(slug="closed", capacity=0)
    event_close(event=closed, actor="test", now=timezone.now())
    closed.refresh_from_db()
    now = timezone.now()
    outcomes = entry_join_many(
        [
            JoinRequest(event=open_sale, identity="a", access_code=None, now=now),
            JoinRequest(event=closed, identity="b", access_code=None, now=now),
            JoinRequest(event=open_sale, identity="c", access_code="NOT-A-CODE", now=now),
            JoinRequest(event=open_sale, identity="d", access_code=None, now=now),
        ]
    )
    assert isinstance(outcomes[0], JoinResult) and isinstance(outcomes[3], JoinResult)
    assert isinstance(outcomes[1], EventClosed) and api_error(outcomes[1]).status == 409
    assert isinstance(outcomes[2], InvalidAccessCode) and outcomes[2].code == "invalid_access_code"
    assert [o.answer.position for o in (outcomes[0], outcomes[3])] == [1, 2]


def test_a_fan_who_raced_another_process_gets_that_ticket_and_the_batch_survives(
    make_event, monkeypatch
) -> None:
    event = make_event(capacity=0)
    (earlier,) = entry_join_many(_requests(event, ["racer"]))
    assert isinstance(earlier, JoinResult)
    # As if the other process committed between this batch's look-up and its insert.
    real = joining.live_entries
    calls = []

    def blind_once(event_id: int, identities: set[str]) -> Any:
        calls.append(identities)
        return {} if len(calls) == 1 else real(event_id, identities)

    monkeypatch.setattr(joining, "live_entries", blind_once)
    outcomes = entry_join_many(_requests(event, ["new-1", "racer", "new-2"]))
    assert all(isinstance(o, JoinResult) for o in outcomes)
    assert [o.created for o in outcomes] == [True, False, True]
    assert outcomes[1].answer.ticket == earlier.answer.ticket
    assert QueueEntry.objects.count() == 3
    assert audit_chain_verify(event_id=event.id).ok


@pytest.mark.parametrize("batch", [1, 7])
def test_a_prequeue_batch_waits_for_the_shuffle(make_event, batch: int) -> None:
    event = make_event(
        prequeue_opens_at=timezone.now() - timezone.timedelta(minutes=1),
        starts_at=timezone.now() + timezone.timedelta(hours=1),
    )
    outcomes = entry_join_many(_requests(event, [f"fan-{i}" for i in range(batch)]))
    assert {o.answer.status for o in outcomes} == {"prequeue"}
    assert set(QueueEntry.objects.values_list("status", flat=True)) == {"prequeue"}


def test_a_new_entry_is_given_every_column_a_fresh_row_needs() -> None:
    """The join path inserts rows itself (queueing/records/entries.py): a column added to
    QueueEntry must be added there too, or be nullable / have a database default."""
    from queueing.records.entries import NEW_ENTRY_FIELDS

    left_out = {
        field.name
        for field in QueueEntry._meta.concrete_fields
        if field.name not in NEW_ENTRY_FIELDS and not field.primary_key
    }
    assert all(
        QueueEntry._meta.get_field(name).null or QueueEntry._meta.get_field(name).has_db_default()
        for name in left_out
    ), left_out
    assert {f.name for f in QueueEntry._meta.concrete_fields if f.has_default()} <= set(
        NEW_ENTRY_FIELDS
    )


def test_many_rows_keep_their_order_and_values(make_event) -> None:
    event = make_event(capacity=0)
    outcomes = entry_join_many(_requests(event, [f"fan-{i}" for i in range(40)]))
    entries = QueueEntry.objects.order_by("order_key")
    assert [e.identity for e in entries] == [f"fan-{i}" for i in range(40)]
    by_ticket = {o.answer.ticket: o for o in outcomes if isinstance(o, JoinResult)}
    assert len(by_ticket) == 40
    first = entries[0]
    assert first.quoted_p50 is not None and first.joined_at == first.status_changed_at
    record = AuditRecord.objects.get(ticket_id=first.public_id)
    assert record.data["order_key"] == first.order_key
    assert record.data["quote"]["p50"] == first.quoted_p50
    assert audit_chain_verify(event_id=event.id).ok


def test_a_failure_before_one_sales_commit_leaves_the_other_sales_joins_standing(
    make_event, monkeypatch
) -> None:
    from django.db import OperationalError

    first = make_event(slug="first", capacity=0)
    second = make_event(slug="second", capacity=0)
    real_commit = joining._commit

    def failing_for_second(event: Any, *args: Any, **kwargs: Any) -> Any:
        if event.id == second.id:
            raise OperationalError("connection lost")
        return real_commit(event, *args, **kwargs)

    monkeypatch.setattr(joining, "_commit", failing_for_second)
    now = timezone.now()
    outcomes = entry_join_many(
        [
            JoinRequest(event=first, identity="a", access_code=None, now=now),
            JoinRequest(event=second, identity="b", access_code=None, now=now),
        ]
    )
    assert isinstance(outcomes[0], JoinResult) and outcomes[0].created
    assert isinstance(outcomes[1], OperationalError)
    assert list(QueueEntry.objects.values_list("identity", flat=True)) == ["a"]


def test_a_lanes_part_failing_after_another_committed_fails_its_own_fans_only(
    make_event, monkeypatch
) -> None:
    from django.db import OperationalError

    from queueing.rules.lanes import lane_of

    event = make_event(slug="laned", capacity=0, lanes=4)
    identities = [f"fan-{i}" for i in range(40)]
    failing_lane = max(lane_of(i, lanes=4) for i in identities)  # its part commits last
    real_commit = joining._commit

    def failing_for_one_lane(event: Any, *args: Any, lane: int, **kwargs: Any) -> Any:
        if lane == failing_lane:
            raise OperationalError("connection lost")
        return real_commit(event, *args, lane=lane, **kwargs)

    monkeypatch.setattr(joining, "_commit", failing_for_one_lane)
    now = timezone.now()
    outcomes = entry_join_many(
        [JoinRequest(event=event, identity=i, access_code=None, now=now) for i in identities]
    )
    for identity, outcome in zip(identities, outcomes, strict=True):
        if lane_of(identity, lanes=4) == failing_lane:
            assert isinstance(outcome, OperationalError)
        else:  # committed, and told so: not the failure of a part that came after theirs
            assert isinstance(outcome, JoinResult) and outcome.created
    joined = set(QueueEntry.objects.values_list("identity", flat=True))
    assert joined == {i for i in identities if lane_of(i, lanes=4) != failing_lane}


def _failing_for(monkeypatch: Any, identity: str, failure: Exception) -> list[int]:
    """Make every insert of ``identity`` fail with ``failure``; the sizes of the inserts."""
    real_insert = joining.entries_insert
    sizes: list[int] = []

    def insert(entries: list[QueueEntry], **how: Any) -> None:
        sizes.append(len(entries))
        if any(entry.identity == identity for entry in entries):
            raise failure
        real_insert(entries, **how)

    monkeypatch.setattr(joining, "entries_insert", insert)
    return sizes


def test_one_joins_failure_is_that_joins_answer_alone(make_event, monkeypatch) -> None:
    event = make_event(capacity=0, tiers=[TierSpec("VIP", access_codes=["VIP"])])
    inserts = _failing_for(monkeypatch, "bad", ValueError("a value nobody can store"))
    now = timezone.now()
    outcomes = entry_join_many(
        [
            JoinRequest(event=event, identity="a", access_code="VIP", now=now),
            JoinRequest(event=event, identity="bad", access_code="VIP", now=now),
            JoinRequest(event=event, identity="wrong", access_code="NOPE", now=now),
            JoinRequest(event=event, identity="b", access_code="VIP", now=now),
            JoinRequest(event=event, identity="bad", access_code="VIP", now=now),
        ]
    )
    a, bad, wrong, b, bad_again = outcomes
    assert isinstance(bad, ValueError) and isinstance(bad_again, ValueError)
    assert isinstance(wrong, InvalidAccessCode)
    assert isinstance(a, JoinResult) and isinstance(b, JoinResult)
    assert (a.created, b.created) == (True, True)
    assert [a.answer.position, b.answer.position] == [1, 2]  # in the batch's order
    assert inserts[0] == 3  # the batch was tried together first
    assert list(QueueEntry.objects.order_by("order_key").values_list("identity", flat=True)) == [
        "a",
        "b",
    ]
    # The wrong code was recorded once, by the batch, not again by its join alone.
    assert AuditRecord.objects.filter(action="rejected").count() == 1
    assert audit_chain_verify(event_id=event.id).ok


def test_postgresql_gone_fails_a_batch_once_not_each_join(make_event, monkeypatch) -> None:
    from django.db import OperationalError

    event = make_event(capacity=0)
    inserts = _failing_for(monkeypatch, "a", OperationalError("server closed the connection"))
    outcomes = entry_join_many(_requests(event, ["a", "b", "c"]))
    assert all(isinstance(o, OperationalError) for o in outcomes)
    assert inserts == [3]  # joining each alone would only wait for it three times


def test_a_committed_join_is_answered_with_its_ticket_even_if_describing_it_fails(
    make_event, monkeypatch
) -> None:
    from django.db import OperationalError

    event = make_event(capacity=0)

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("server closed the connection")

    monkeypatch.setattr(joining, "entry_answer", unreachable)
    monkeypatch.setattr(index_sync, "QueueEntry", _UnreachableModel)
    outcomes = entry_join_many(_requests(event, ["a", "b"]))
    assert all(isinstance(o, JoinResult) and o.created for o in outcomes)
    assert [o.answer.position for o in outcomes] == [None, None]
    assert {o.answer.status for o in outcomes} == {"waiting"}
    assert QueueEntry.objects.count() == 2


def test_a_value_too_long_for_its_column_is_refused_not_cut(make_event) -> None:
    from django.db import DataError, transaction

    from queueing.records.bulk_insert import insert_rows

    event = make_event(capacity=0)
    tier = event.tiers.get()
    now = timezone.now()
    with pytest.raises(DataError), transaction.atomic():
        insert_rows(
            QueueEntry,
            ("event", "tier", "identity", "status", "joined_at", "status_changed_at"),
            [[event.id, tier.id, "x" * 65, "waiting", now, now]],
        )


def test_a_batch_is_indexed_even_after_redis_forgot_its_scripts(make_event, redis_client) -> None:
    from queueing.hot import keys

    event = make_event(capacity=0)
    redis_client.script_flush()
    outcomes = entry_join_many(_requests(event, [f"fan-{i}" for i in range(3)]))
    assert [o.answer.position for o in outcomes] == [1, 2, 3]
    tier = event.tiers.get()
    assert redis_client.zcard(keys.tier_queue(event.id, tier.id)) == 3


def _joined_while_the_root_head_is_held(event: Any, identities: list[str]) -> list[Any]:
    """``identities`` join in another connection (failing at once on a lock wait, rather than
    hanging) while this one holds the on-sale's root chain head."""
    import threading

    from django.db import connection, transaction

    from queueing.records.audit import audit_chain_lock

    outcomes: list[Any] = []

    def join_elsewhere() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '2s'")
            outcomes.extend(entry_join_many(_requests(event, identities)))
        finally:
            connection.close()

    with transaction.atomic():
        audit_chain_lock(event_id=event.id)
        worker = threading.Thread(target=join_elsewhere)
        worker.start()
        worker.join(timeout=30)
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_a_laned_prequeue_join_needs_only_its_lanes_head(make_event) -> None:
    event = make_event(
        slug="laned-pre",
        lanes=4,
        prequeue_opens_at=timezone.now() - timezone.timedelta(minutes=1),
        starts_at=timezone.now() + timezone.timedelta(hours=1),
    )
    outcomes = _joined_while_the_root_head_is_held(event, [f"fan-{i}" for i in range(12)])
    assert all(isinstance(o, JoinResult) for o in outcomes), outcomes
    assert {o.answer.status for o in outcomes} == {"prequeue"}
    assert QueueEntry.objects.values("lane").distinct().count() > 1


@pytest.mark.django_db(transaction=True)
def test_a_laned_join_under_an_address_cap_waits_for_the_root_head(make_event) -> None:
    event = make_event(slug="laned-cap", lanes=4, capacity=0, max_live_per_address=3)
    outcomes = _joined_while_the_root_head_is_held(event, ["fan-1"])
    assert len(outcomes) == 1 and not isinstance(outcomes[0], JoinResult)
    assert not QueueEntry.objects.exists()
