import hashlib
from collections import Counter
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from queueing.beat import event_tick
from queueing.hot import epoch, keys, line_index
from queueing.hot.line_index import IndexState
from queueing.line.expiry import queued_expire_unseen
from queueing.line.index_sync import hot_index_rebuild
from queueing.line.reads import event_layout
from queueing.line.sessions import pass_verify
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from queueing.rules.shuffle import shuffled_order
from staff.services import event_close, event_pause, event_update
from tests.helpers import entry_of, fans_join, poll, statuses

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("lanes", [1, 4])
def test_the_prequeue_shuffle_is_reproducible_from_the_revealed_seed(make_event) -> None:
    starts = timezone.now() + timedelta(minutes=5)
    event = make_event(starts_at=starts, capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    published = Client().get(f"/api/v1/events/{event.slug}").json()
    assert published["shuffle_seed"] is None
    commitment = published["shuffle_seed_sha256"]
    created = AuditRecord.objects.get(event=event, action="event_created")
    assert created.data["shuffle_seed_sha256"] == commitment

    early = fans_join(event.slug, 30)
    assert {poll(t)["status"] for t in early} == {"prequeue"}
    event_tick(event_id=event.id, now=starts - timedelta(seconds=1))
    assert set(statuses(early)) == {"prequeue"}

    # Staff pause, then bring the start forward to now: joins from here on are real late
    # arrivals, and admission does not move anyone while we look at the order.
    event_pause(event=event, actor="staff:x", now=timezone.now())
    started = timezone.now()
    event_update(event=event, actor="staff:x", now=started, changes={"starts_at": started})
    event_tick(event_id=event.id, now=timezone.now())
    late = fans_join(event.slug, 3)

    revealed = Client().get(f"/api/v1/events/{event.slug}").json()["shuffle_seed"]
    assert hashlib.sha256(revealed.encode()).hexdigest() == commitment
    shuffled = AuditRecord.objects.get(event=event, action="shuffled")
    assert shuffled.data["seed"] == revealed and shuffled.data["cohort"] == 30

    # Anyone can recompute the order from the trail: the cohort's ticket ids and the seed.
    cohort = [
        str(r.ticket_id)
        for r in AuditRecord.objects.filter(event=event, action="joined")
        if r.data["status"] == "prequeue"
    ]
    expected = shuffled_order(revealed, cohort)
    actual = [
        str(public_id)
        for public_id in QueueEntry.objects.filter(event=event, status="waiting")
        .order_by("order_key")
        .values_list("public_id", flat=True)
    ]
    assert actual[:30] == expected
    assert actual[:30] != cohort  # it did reorder
    # Later arrivals queue FIFO behind the cohort.
    assert actual[30:] == [str(entry_of(t).public_id) for t in late]
    assert [poll(t)["position"] for t in late] == [31, 32, 33]


@pytest.mark.parametrize("lanes", [1, 4])
def test_without_shuffle_the_prequeue_keeps_join_order(make_event) -> None:
    starts = timezone.now() + timedelta(minutes=5)
    event = make_event(
        starts_at=starts,
        shuffle_at_start=False,
        capacity=0,
        rate_per_minute=0,
        heartbeat_seconds=3600,
    )
    tickets = fans_join(event.slug, 5)
    event_pause(event=event, actor="staff:x", now=starts)
    event_tick(event_id=event.id, now=starts + timedelta(seconds=1))
    assert [poll(t)["position"] for t in tickets] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("lanes", [1, 4])
def test_admission_waits_for_the_shuffle(make_event) -> None:
    starts = timezone.now() + timedelta(minutes=5)
    event = make_event(starts_at=starts, capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    early = fans_join(event.slug, 5)
    outcome = event_tick(event_id=event.id, now=starts + timedelta(seconds=1))
    assert outcome is not None and len(outcome.admitted) == 5
    assert set(statuses(early)) == {"admitted"}


@pytest.mark.parametrize("lanes", [1, 4])
def test_closing_revokes_everyone_still_in_line(make_event) -> None:
    event = make_event(capacity=1, rate_per_minute=0)
    tickets = fans_join(event.slug, 4)
    event_tick(event_id=event.id, now=timezone.now())
    event_close(event=event, actor="staff:x", now=timezone.now())
    event_tick(event_id=event.id, now=timezone.now())
    assert statuses(tickets) == ["admitted", "revoked", "revoked", "revoked"]
    assert poll(tickets[1])["status"] == "revoked"
    assert AuditRecord.objects.filter(action="revoked").count() == 3


@pytest.mark.parametrize("lanes", [1, 4])
def test_after_ends_at_the_line_is_revoked(make_event) -> None:
    now = timezone.now()
    event = make_event(
        capacity=0, rate_per_minute=0, ends_at=now + timedelta(minutes=1), heartbeat_seconds=3600
    )
    event_pause_at = now
    event_pause(event=event, actor="staff:x", now=event_pause_at)
    tickets = fans_join(event.slug, 2)
    event_tick(event_id=event.id, now=now + timedelta(minutes=2))
    assert statuses(tickets) == ["revoked", "revoked"]


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_pre_queue_join_committed_after_the_start_queues_behind_the_cohort(
    make_event, redis_client
) -> None:
    from queueing.line.schedule import line_admit_stragglers

    starts = timezone.now() + timedelta(minutes=5)
    event = make_event(
        starts_at=starts,
        shuffle_at_start=False,
        capacity=0,
        rate_per_minute=0,
        heartbeat_seconds=3600,
    )
    cohort = fans_join(event.slug, 3)
    event_pause(event=event, actor="staff:x", now=starts)
    event_tick(event_id=event.id, now=starts + timedelta(seconds=1))
    # A join decided "pre-queue" before the start but committed after it.
    late = fans_join(event.slug, 2)
    QueueEntry.objects.filter(pk__in=[entry_of(t).pk for t in late]).update(status="prequeue")
    layout = event_layout(event.id)
    for ticket in late:
        entry = entry_of(ticket)
        redis_client.zrem(keys.tier_queue(event.id, entry.tier_id, entry.lane), str(entry.pk))
        line_index.locate(
            layout,
            member=entry.pk,
            tier_id=entry.tier_id,
            heartbeat_deadline=None,
            add="pre",
            order_key=entry.order_key,
            lane=entry.lane,
        )
    assert line_admit_stragglers(event_id=event.id, now=starts + timedelta(seconds=2)) == 2
    assert set(statuses(late)) == {"waiting"}
    assert line_index.line_counts(layout).prequeue == 0
    assert line_index.line_counts(layout).waiting == 5  # indexed in their tier
    assert [poll(t)["position"] for t in cohort + late] == [1, 2, 3, 4, 5]


def _one_record_each(event, action: str) -> int:
    tickets = Counter(
        AuditRecord.objects.filter(event=event, action=action).values_list("ticket_id", flat=True)
    )
    assert set(tickets.values()) <= {1}, "a fan with two records"
    return len(tickets)


def test_a_line_longer_than_a_chunk_is_revoked_whole_and_the_shop_keeps_its_fans(
    make_event, redis_client, settings
) -> None:
    settings.WR_LINE_END_CHUNK = 4
    event = make_event(capacity=2, rate_per_minute=0, heartbeat_seconds=3600)
    tickets = fans_join(event.slug, 13)
    event_tick(event_id=event.id, now=timezone.now())
    inside = [t for t in tickets if poll(t)["status"] == "admitted"]
    assert len(inside) == 2
    passes = [poll(t)["pass"] for t in inside]
    tier_id = entry_of(tickets[0]).tier_id
    assert redis_client.zcard(keys.tier_queue(event.id, tier_id)) == 11

    event_close(event=event, actor="staff:x", now=timezone.now())
    event_tick(event_id=event.id, now=timezone.now())

    assert Counter(statuses(tickets)) == {"admitted": 2, "revoked": 11}
    assert _one_record_each(event, "revoked") == 11
    revoked = set(
        AuditRecord.objects.filter(event=event, action="revoked").values_list(
            "ticket_id", flat=True
        )
    )
    assert not revoked & {entry_of(t).public_id for t in inside}
    assert audit_chain_verify(event_id=event.id).ok
    # The shop keeps the fans it holds: their passes still let them in.
    for token in passes:
        assert pass_verify(token=token, now=timezone.now(), event_slug=event.slug).valid
    # The line left the hot index whole; the index itself is still whole (an empty line).
    for key in (keys.tier_queue(event.id, tier_id), keys.heartbeats(event.id)):
        assert not redis_client.exists(key)
    assert epoch.epoch_states([event.id]) == {event.id: IndexState.READY}
    assert {poll(t)["status"] for t in tickets if t not in inside} == {"revoked"}


def test_a_tick_whose_time_is_up_leaves_the_rest_to_the_next(
    make_event, redis_client, settings
) -> None:
    settings.WR_LINE_END_CHUNK = 3
    settings.WR_LINE_END_SECONDS = 0
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    tickets = fans_join(event.slug, 8)
    event_close(event=event, actor="staff:x", now=timezone.now())
    queue = keys.tier_queue(event.id, entry_of(tickets[0]).tier_id)
    left = []
    for _ in range(3):
        event_tick(event_id=event.id, now=timezone.now())
        left.append(QueueEntry.objects.filter(event=event, status="waiting").count())
        if left[-1]:
            # Not dropped while anyone is left: the index still answers those in line.
            assert redis_client.zcard(queue) == 8
    assert left == [5, 2, 0]
    assert not redis_client.exists(queue)
    assert _one_record_each(event, "revoked") == 8
    assert audit_chain_verify(event_id=event.id).ok


def test_a_tick_that_revokes_the_last_full_chunk_drops_the_line(
    make_event, redis_client, settings
) -> None:
    # Nobody is left in the room after it, so no tick would come to drop the line later.
    settings.WR_LINE_END_CHUNK = 4
    settings.WR_LINE_END_SECONDS = 0
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    tickets = fans_join(event.slug, 8)
    event_close(event=event, actor="staff:x", now=timezone.now())
    queue = keys.tier_queue(event.id, entry_of(tickets[0]).tier_id)
    event_tick(event_id=event.id, now=timezone.now())
    assert redis_client.zcard(queue) == 8
    event_tick(event_id=event.id, now=timezone.now())
    assert set(statuses(tickets)) == {"revoked"}
    assert not redis_client.exists(queue)


def test_a_rebuild_under_way_when_the_line_is_dropped_is_not_promoted(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    fans_join(event.slug, 3)
    layout = event_layout(event.id)
    handle = epoch.rebuild_begin(event.id, tier_ids=[t.id for t in layout.tiers], lock_seconds=30)
    assert handle is not None
    event_close(event=event, actor="staff:x", now=timezone.now())
    event_tick(event_id=event.id, now=timezone.now())
    # It read the line before it ended: its load and promotion must fail.
    assert not epoch.rebuild_finish(handle)
    assert epoch.epoch_states([event.id]) == {event.id: IndexState.MISSING}
    assert hot_index_rebuild(event_id=event.id)  # from PostgreSQL: an empty line
    assert line_index.line_counts(event_layout(event.id)).queue_length == 0


def test_the_unseen_expire_in_chunks_each_with_one_record(
    make_event, redis_client, settings
) -> None:
    settings.WR_EXPIRY_CHUNK = 4
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=30, away_seconds=0)
    tickets = fans_join(event.slug, 10)
    later = timezone.now() + timedelta(seconds=31)
    assert queued_expire_unseen(event_id=event.id, now=later) == 10
    assert set(statuses(tickets)) == {"expired"}
    assert _one_record_each(event, "expired") == 10
    assert redis_client.zcard(keys.heartbeats(event.id)) == 0
    assert redis_client.zcard(keys.tier_queue(event.id, entry_of(tickets[0]).tier_id)) == 0
    assert audit_chain_verify(event_id=event.id).ok


def test_a_tick_expires_the_unseen_for_its_expiry_time_and_then_admits(
    make_event, settings
) -> None:
    settings.WR_EXPIRY_CHUNK = 4
    settings.WR_EXPIRY_SECONDS = 0
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=30, away_seconds=0)
    tickets = fans_join(event.slug, 10)
    event_pause(event=event, actor="staff:x", now=timezone.now())
    later = timezone.now() + timedelta(seconds=31)
    expired = []
    for _ in range(3):
        event_tick(event_id=event.id, now=later)
        expired.append(statuses(tickets).count("expired"))
    assert expired == [4, 8, 10]
    assert _one_record_each(event, "expired") == 10


def test_a_line_of_several_lanes_is_revoked_and_every_lane_dropped(
    make_event, redis_client, settings
) -> None:
    settings.WR_LINE_END_CHUNK = 5
    event = make_event(lanes=4, capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    tickets = fans_join(event.slug, 24)
    lanes = {entry_of(t).lane for t in tickets}
    assert len(lanes) > 1
    tier_id = entry_of(tickets[0]).tier_id
    event_close(event=event, actor="staff:x", now=timezone.now())
    event_tick(event_id=event.id, now=timezone.now())
    assert set(statuses(tickets)) == {"revoked"}
    assert _one_record_each(event, "revoked") == 24
    assert audit_chain_verify(event_id=event.id).ok
    for lane in range(4):
        assert not redis_client.exists(keys.tier_queue(event.id, tier_id, lane))
        assert not redis_client.exists(keys.heartbeats(event.id, lane))


def test_the_unseen_of_several_lanes_expire_in_chunks(make_event, redis_client, settings) -> None:
    settings.WR_EXPIRY_CHUNK = 3
    event = make_event(lanes=4, capacity=0, rate_per_minute=0, heartbeat_seconds=30, away_seconds=0)
    tickets = fans_join(event.slug, 16)
    assert len({entry_of(t).lane for t in tickets}) > 1
    later = timezone.now() + timedelta(seconds=31)
    assert queued_expire_unseen(event_id=event.id, now=later) == 16
    assert _one_record_each(event, "expired") == 16
    for lane in range(4):
        assert redis_client.zcard(keys.heartbeats(event.id, lane)) == 0
