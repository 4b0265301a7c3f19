"""The hot index is derived from PostgreSQL: it is rebuilt exactly, even while fans move."""

import asyncio
import time

import pytest
import redis
from django.test import Client
from django.utils import timezone

from queueing.hot import client, epoch, keys, line_index, stats
from queueing.hot.client import HotIndexUnavailable
from queueing.hot.epoch import IndexedEntry
from queueing.hot.line_index import IndexState, LocateRequest
from queueing.line import index_sync
from queueing.line.reads import event_layout
from queueing.models import QueueEntry
from queueing.rules.ticket_codec import ticket_read
from tests.helpers import join, new_fan
from tests.processes import free_port

pytestmark = pytest.mark.django_db


def positions(tickets: list[str]) -> list[int | None]:
    return [Client().get(f"/api/v1/tickets/{t}").json()["position"] for t in tickets]


def wipe_event(redis_client, event_id: int) -> None:
    """What FLUSHALL does to one event: every key of it is gone."""
    for key in redis_client.scan_iter(match=f"{keys.prefix()}:{{{event_id}}}:*"):
        redis_client.delete(key)


def test_a_new_event_has_a_ready_empty_index(event) -> None:
    assert epoch.epoch_states([event.id]) == {event.id: IndexState.READY}


def test_positions_are_served_from_postgresql_while_the_index_is_lost(event, redis_client) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(4)]
    wipe_event(redis_client, event.id)
    assert positions(tickets) == [1, 2, 3, 4]


def test_a_rebuild_restores_every_position_and_new_joins_go_behind(event, redis_client) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(6)]
    new_fan().delete(f"/api/v1/tickets/{tickets[2]}")
    before = positions(tickets)
    wipe_event(redis_client, event.id)
    assert index_sync.hot_index_maintain() == [event.id]
    assert epoch.epoch_states([event.id]) == {event.id: IndexState.READY}
    assert positions(tickets) == before
    assert join(new_fan(), event.slug).json()["position"] == 6


def test_the_maintenance_task_rebuilds_events_flagged_stale(event) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    event.__class__.objects.filter(pk=event.pk).update(hot_index_dirty=True)
    assert index_sync.hot_index_maintain() == [event.id]
    event.refresh_from_db()
    assert not event.hot_index_dirty
    assert positions(tickets) == [1, 2, 3]


def test_entries_that_leave_during_a_rebuild_are_not_loaded_back(event) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    layout = event_layout(event.id)
    rows = list(QueueEntry.objects.order_by("id").values_list("id", "tier_id", "order_key"))
    handle = epoch.rebuild_begin(event.id, tier_ids=[t.id for t in layout.tiers], lock_seconds=30)
    # The rebuild has read all three rows as waiting; now the second fan leaves...
    new_fan().delete(f"/api/v1/tickets/{tickets[1]}")
    # ...and a new fan joins while the rebuild is still loading.
    late = join(new_fan(), event.slug).json()["ticket"]
    epoch.rebuild_load(
        handle,
        epoch.rebuild_lines(IndexedEntry(member=i, tier_id=t, order_key=k) for i, t, k in rows),
        heartbeat_deadline=timezone.now().timestamp() + 60,
    )
    assert epoch.rebuild_finish(handle)
    counts = line_index.line_counts(layout)
    assert counts.queue_length == 3
    assert positions([tickets[0], tickets[2], late]) == [1, 2, 3]


def test_a_rebuild_is_abandoned_if_redis_is_flushed_again_meanwhile(event, redis_client) -> None:
    join(new_fan(), event.slug)
    layout = event_layout(event.id)
    handle = epoch.rebuild_begin(event.id, tier_ids=[t.id for t in layout.tiers], lock_seconds=30)
    wipe_event(redis_client, event.id)
    with pytest.raises(epoch.RebuildSuperseded):
        epoch.rebuild_load(
            handle,
            epoch.rebuild_lines([IndexedEntry(member=1, tier_id=layout.tiers[0].id, order_key=1)]),
            heartbeat_deadline=0.0,
        )
    assert not epoch.rebuild_finish(handle)


def test_only_one_rebuild_runs_at_a_time(event) -> None:
    layout = event_layout(event.id)
    tier_ids = [t.id for t in layout.tiers]
    first = epoch.rebuild_begin(event.id, tier_ids=tier_ids, lock_seconds=30)
    assert first is not None
    assert epoch.rebuild_begin(event.id, tier_ids=tier_ids, lock_seconds=30) is None
    assert not index_sync.hot_index_rebuild(event_id=event.id)
    epoch.rebuild_finish(first)


def test_status_reads_refresh_the_heartbeat(event, redis_client) -> None:
    ticket = join(new_fan(), event.slug).json()["ticket"]
    ref = ticket_read(ticket)
    redis_client.zadd(keys.heartbeats(event.id), {str(ref.entry_id): 1.0})
    Client().get(f"/api/v1/tickets/{ticket}")
    deadline = redis_client.zscore(keys.heartbeats(event.id), str(ref.entry_id))
    assert deadline > timezone.now().timestamp() + event.heartbeat_seconds - 5


@pytest.fixture
def redis_down(monkeypatch):
    # Built the way django-redis builds its clients: from a pool (no retries, short timeouts).
    pool = redis.ConnectionPool(port=free_port(), socket_connect_timeout=0.2, socket_timeout=0.2)
    dead = redis.Redis(connection_pool=pool)
    monkeypatch.setattr(client, "get_redis_connection", lambda alias: dead)


def test_joins_and_status_work_from_postgresql_while_redis_is_down(event, redis_down) -> None:
    first = join(new_fan(), event.slug)
    second = join(new_fan(), event.slug)
    assert (first.status_code, second.status_code) == (201, 201)
    assert second.json()["position"] == 2
    assert positions([first.json()["ticket"], second.json()["ticket"]]) == [1, 2]
    new_fan().delete(f"/api/v1/tickets/{first.json()['ticket']}")
    assert positions([second.json()["ticket"]]) == [1]
    event.refresh_from_db()
    assert event.hot_index_dirty  # the index missed writes: it will be rebuilt


def test_readyz_says_degraded_not_down_while_redis_is_down(event, redis_down) -> None:
    # A load balancer must keep the process: it still serves joins and status.
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.content == b"degraded: redis"
    assert join(new_fan(), event.slug).status_code == 201
    metrics = Client().get("/metrics").content.decode()
    assert 'waitingroom_dependency_out{dependency="redis",impact="degraded"} 1.0' in metrics
    assert 'waitingroom_dependency_out{dependency="postgresql",impact="down"} 0.0' in metrics


def test_a_join_whose_fan_was_admitted_before_it_reached_redis_leaves_no_ghost(
    make_event, redis_client
) -> None:
    from queueing.beat import event_tick
    from queueing.line.index_sync import index_add
    from queueing.line.reads import event_layout

    event = make_event(capacity=5, rate_per_minute=0)
    first = join(new_fan(), event.slug).json()["ticket"]
    entry = QueueEntry.objects.get(pk=ticket_read(first).entry_id)
    # Admission runs, then the join's own (late) add arrives.
    event_tick(event_id=event.id, now=timezone.now())
    entry.refresh_from_db()
    assert entry.status == "admitted"
    entry.status = "waiting"  # the join's stale in-memory row
    index_add(event_layout(event.id), [entry], add="tier", heartbeat_deadline=time.time() + 60)
    assert redis_client.zscore(keys.tier_queue(event.id, entry.tier_id), str(entry.id)) is None
    assert Client().get(f"/api/v1/tickets/{first}").json()["status"] == "admitted"


def test_a_ghost_at_the_front_is_removed_by_the_next_tick(make_event, redis_client) -> None:
    from queueing.beat import event_tick

    event = make_event(capacity=1, rate_per_minute=0)
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    event_tick(event_id=event.id, now=timezone.now())
    admitted = QueueEntry.objects.get(status="admitted")
    # A process died between admission's commit and its Redis write:
    redis_client.zadd(keys.tier_queue(event.id, admitted.tier_id), {str(admitted.id): 0})
    assert positions(tickets[1:]) == [2, 3]
    event_tick(event_id=event.id, now=timezone.now())
    assert positions(tickets[1:]) == [1, 2]


def test_a_failed_rebuild_is_retried_until_it_succeeds(event, monkeypatch) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    real = epoch.rebuild_load

    def blip(*args, **kwargs):
        raise client.HotIndexUnavailable("blip")

    monkeypatch.setattr(epoch, "rebuild_load", blip)
    event.__class__.objects.filter(pk=event.pk).update(hot_index_dirty=True)
    assert index_sync.hot_index_maintain() == []
    event.refresh_from_db()
    assert event.hot_index_dirty  # flagged again, not left half-built and forgotten
    monkeypatch.setattr(epoch, "rebuild_load", real)
    assert index_sync.hot_index_maintain() == [event.id]
    assert epoch.epoch_states([event.id]) == {event.id: IndexState.READY}
    assert positions(tickets) == [1, 2, 3]


def test_a_rebuild_whose_worker_died_is_restarted(event, redis_client) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(2)]
    layout = event_layout(event.id)
    handle = epoch.rebuild_begin(event.id, tier_ids=[t.id for t in layout.tiers], lock_seconds=30)
    assert handle is not None
    # The worker is killed here: the epoch says "building" and its lock lapses.
    redis_client.delete(keys.rebuild_lock(event.id))
    assert index_sync.hot_index_maintain() == [event.id]
    assert positions(tickets) == [1, 2]


def test_an_index_written_by_another_redis_run_is_rebuilt(event, redis_client) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(2)]
    # What an AOF restart or a failover looks like: the epoch survived, from another run.
    redis_client.set(keys.epoch(event.id), "ready:0123456789abcdef:sometoken")
    assert epoch.epoch_states([event.id]) == {event.id: IndexState.MISSING}
    assert index_sync.hot_index_maintain() == [event.id]
    assert epoch.epoch_states([event.id]) == {event.id: IndexState.READY}
    assert positions(tickets) == [1, 2]


def test_an_asyncio_client_failing_with_a_plain_runtime_error_counts_as_redis_down(
    event, monkeypatch
) -> None:
    """redis-py's asyncio cluster client, when a node times out, drops connections other
    coroutines are using; they fail with RuntimeError or AttributeError, not RedisError. The
    lean status path must hear "Redis is down" (and go to PostgreSQL), not crash with a 500."""

    class Broken:
        async def hgetall(self, key: str) -> None:
            raise AttributeError("'NoneType' object has no attribute 'writelines'")

        async def evalsha(self, *args: object) -> None:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>")

    async def broken_client() -> Broken:
        return Broken()

    monkeypatch.setattr(client, "async_client_ready", broken_client)
    monkeypatch.setattr(stats, "async_client_ready", broken_client)
    layout = event_layout(event.id)
    tier_id = layout.tiers[0].id
    request = LocateRequest(member=1, tier_id=tier_id, heartbeat_deadline=0.0)
    with pytest.raises(HotIndexUnavailable):
        asyncio.run(line_index.locate_async(layout, request))
    with pytest.raises(HotIndexUnavailable):
        asyncio.run(stats.read_throughput_async(event.id))
