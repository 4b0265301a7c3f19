"""Status without the hot index (issue 18): polls placed from the line's snapshot on both
paths, the answer saying so and asking to come back later, and heartbeats Redis could not
record never expiring anyone."""

from __future__ import annotations

import asyncio
import copy
import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone
from django_redis import get_redis_connection
from redis.exceptions import MaxConnectionsError

from events.models import Event
from queueing.beat import event_tick
from queueing.hot import epoch, keys
from queueing.line import expiry
from queueing.line.answers import ticket_poll_async
from queueing.line.expiry import queued_expire_unseen
from queueing.line.index_sync import hot_index_rebuild
from queueing.line.reads import event_layout
from queueing.models import QueueEntry
from queueing.rules.layout import poll_after_seconds
from queueing.rules.ticket_codec import ticket_read
from tests.helpers import fans_join, statuses, tickets_in_line_order, waiting_entries

pytestmark = pytest.mark.django_db

DEAD_REDIS = "redis://127.0.0.1:9/0"  # the discard port: nothing listens


def line_of(event, count: int) -> list[str]:
    """``count`` waiting fans (written straight to PostgreSQL), their tickets in line order,
    and the index rebuilt with them."""
    tier = event.tiers.get()
    waiting_entries(event, tier, count, prefix="fan")
    assert hot_index_rebuild(event_id=event.id)
    return tickets_in_line_order(event, tier)


def rebuilding(event) -> None:
    """The index as a rebuild that has only begun leaves it: not to be trusted."""
    layout = event_layout(event.id)
    assert epoch.rebuild_begin(event.id, tier_ids=[t.id for t in layout.tiers], lock_seconds=30)


def test_while_the_index_is_rebuilt_polls_are_placed_from_a_snapshot(make_event, settings) -> None:
    settings.WR_DEGRADED_EXACT_LINE = 50
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=60)
    tickets = line_of(event, 3000)
    rebuilding(event)
    front = Client().get(f"/api/v1/tickets/{tickets[3]}")
    answers = [Client().get(f"/api/v1/tickets/{tickets[i]}") for i in range(2000, 2010)]
    assert (front.json()["position"], front.json()["approximate"]) == (4, False)
    for rank, answer in enumerate(answers, start=2000):
        assert answer.json()["status"] == "waiting"
        assert abs(answer.json()["position"] - (rank + 1)) <= 30
        assert answer.json()["queue_length"] == 3000
    assert any(answer.json()["approximate"] for answer in answers)
    back = answers[0]
    assert float(back["X-Poll-After-Seconds"]) == poll_after_seconds(
        heartbeat_seconds=60, position=back.json()["position"], degraded=True
    )
    assert float(back["X-Poll-After-Seconds"]) > poll_after_seconds(
        heartbeat_seconds=60, position=back.json()["position"]
    )


def test_a_short_line_is_counted_exactly_while_the_index_is_rebuilt(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=0)
    tickets = fans_join(event.slug, 5)
    rebuilding(event)
    answers = [Client().get(f"/api/v1/tickets/{t}").json() for t in tickets]
    assert [a["position"] for a in answers] == [1, 2, 3, 4, 5]
    assert {a["approximate"] for a in answers} == {False}


def test_a_join_without_redis_is_placed_behind_the_line_and_the_event_flagged(
    make_event, settings
) -> None:
    settings.WR_DEGRADED_EXACT_LINE = 50
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=60)
    line_of(event, 120)
    reachable = settings.CACHES
    caches = copy.deepcopy(reachable)
    caches["default"]["LOCATION"] = DEAD_REDIS
    if "CLUSTER_SEEDS" in caches["default"]["OPTIONS"]:
        caches["default"]["OPTIONS"]["CLUSTER_SEEDS"] = DEAD_REDIS
    settings.CACHES = caches  # the synchronous hot index: unreachable
    try:
        (ticket,) = fans_join(event.slug, 1)
        answer = Client().get(f"/api/v1/tickets/{ticket}")
        time.sleep(1.0)
        again = Client().get(f"/api/v1/tickets/{ticket}")
    finally:
        settings.CACHES = reachable
    assert answer.status_code == 200
    assert answer.json()["status"] == "waiting"
    assert answer.json()["position"] == 121
    assert again.json()["position"] == 121
    assert Event.objects.get(pk=event.pk).hot_index_dirty


@pytest.mark.django_db(transaction=True)  # the lean path reads entries in threads of its own
def test_the_lean_path_answers_from_the_snapshot_while_redis_is_away(make_event, settings) -> None:
    settings.WR_DEGRADED_EXACT_LINE = 50
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=60)
    tickets = line_of(event, 3000)
    settings.REDIS_URL = DEAD_REDIS  # the event loop's client is made from it
    settings.WR_HOT_RETRY_SECONDS = 0.0

    async def polls() -> list:
        views = []
        for index in (0, 1500, 1500):
            views.append(await ticket_poll_async(ticket_read(tickets[index]), tickets[index]))
            await asyncio.sleep(0.6)
        return views

    first, middle, again = asyncio.run(polls())
    assert (first.position, first.approximate) == (1, False)
    assert abs(middle.position - 1501) <= 30
    assert again.position == middle.position
    assert middle.poll_after_seconds == poll_after_seconds(
        heartbeat_seconds=60, position=middle.position, degraded=True
    )
    # Failing for more than a second: the heartbeats Redis could not record are flagged.
    assert Event.objects.get(pk=event.pk).hot_index_dirty


def test_heartbeats_are_flagged_unrecorded_only_after_failing_for_a_second() -> None:
    due = expiry._gaps.unrecorded_due
    assert not due(1, now=100.0)
    assert not due(1, now=100.9)
    assert due(1, now=101.0)
    assert not due(1, now=101.5)  # at most once a second
    assert due(1, now=102.0)
    expiry._gaps.recorded(1)  # a success ends the run of failures
    assert not due(1, now=103.0)
    assert due(1, now=104.0)
    assert not due(2, now=104.0)  # per on-sale


def test_nobody_expires_while_heartbeats_went_unrecorded_until_a_heartbeat_after_the_rebuild(
    make_event, redis_client
) -> None:
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=30, away_seconds=0)
    tickets = fans_join(event.slug, 3)
    ids = list(QueueEntry.objects.filter(event=event).values_list("id", flat=True))
    # Redis came back with the deadlines it had: all past, the polls meanwhile lost.
    redis_client.zadd(keys.heartbeats(event.id), {str(i): 1.0 for i in ids})
    Event.objects.filter(pk=event.pk).update(hot_index_dirty=True)  # what the polls flagged
    now = timezone.now()
    assert queued_expire_unseen(event_id=event.id, now=now) == 0
    assert hot_index_rebuild(event_id=event.id, now=now)
    assert queued_expire_unseen(event_id=event.id, now=now + timedelta(seconds=29)) == 0
    assert statuses(tickets) == ["waiting"] * 3
    assert queued_expire_unseen(event_id=event.id, now=now + timedelta(seconds=31)) == 3


def test_admission_counts_everyone_as_seen_while_heartbeats_went_unrecorded(
    make_event, redis_client
) -> None:
    event = make_event(capacity=2, rate_per_minute=0)
    tickets = fans_join(event.slug, 2)
    ids = list(QueueEntry.objects.filter(event=event).values_list("id", flat=True))
    redis_client.zadd(keys.heartbeats(event.id), {str(i): 1.0 for i in ids})
    Event.objects.filter(pk=event.pk).update(hot_index_dirty=True)
    outcome = event_tick(event_id=event.id, now=timezone.now())
    assert (len(outcome.admitted), len(outcome.expired)) == (2, 0)
    assert statuses(tickets) == ["admitted", "admitted"]


def test_the_rebuild_streams_a_line_longer_than_its_chunks(make_event, settings) -> None:
    settings.WR_REBUILD_BATCH = 100
    event = make_event(capacity=0, rate_per_minute=0)
    tickets = line_of(event, 450)
    started = time.monotonic()
    assert hot_index_rebuild(event_id=event.id)
    assert time.monotonic() - started < 5
    sample = [0, 99, 100, 101, 333, 449]
    assert [Client().get(f"/api/v1/tickets/{tickets[i]}").json()["position"] for i in sample] == [
        i + 1 for i in sample
    ]


@pytest.mark.skipif(
    django_settings.REDIS_CLUSTER, reason="one plain Redis's pool (a cluster has one per node)"
)
def test_heartbeats_a_spent_connection_pool_could_not_record_are_flagged(
    make_event, monkeypatch
) -> None:
    """A process whose Redis pool stays spent records no heartbeats, though Redis answers
    others: after a second of that its polls flag the on-sale, so nobody is expired for the
    heartbeats it lost."""
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=60)
    (ticket,) = fans_join(event.slug, 1)
    pool = get_redis_connection("default").connection_pool
    monkeypatch.setattr(pool, "max_connections", 4)
    held = []  # every connection the pool may make, busy elsewhere
    try:
        while True:
            held.append(pool.get_connection())
    except MaxConnectionsError:
        pass
    try:
        answer = Client().get(f"/api/v1/tickets/{ticket}")
        time.sleep(1.0)
        again = Client().get(f"/api/v1/tickets/{ticket}")
    finally:
        for connection in held:
            pool.release(connection)
    assert (answer.status_code, again.status_code) == (200, 200)
    assert again.json()["position"] == 1
    assert Event.objects.get(pk=event.pk).hot_index_dirty
