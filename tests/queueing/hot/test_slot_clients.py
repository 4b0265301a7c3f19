"""The lean paths' scripts go straight to their slot's master on a Redis Cluster, and through
the cluster client when that master no longer holds the slot (queueing/hot/cluster.py,
``SlotClients``). On a single Redis they use the loop's one client."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from queueing.hot import client, keys, line_index
from queueing.hot.line_index import LocateRequest, Where
from queueing.line.reads import event_layout
from queueing.rules.ticket_codec import ticket_read
from tests.helpers import join, new_fan

cluster_only = pytest.mark.skipif(
    not settings.REDIS_CLUSTER, reason="runs in the Redis Cluster pass of `make test`"
)


def _joined(slug: str, count: int) -> list[int]:
    """Entry ids of ``count`` fans who joined, in order."""
    return [ticket_read(join(new_fan(), slug).json()["ticket"]).entry_id for _ in range(count)]


def _locate(layout, member: int) -> line_index.Placement:
    request = LocateRequest(member=member, tier_id=layout.tiers[0].id, heartbeat_deadline=None)
    return asyncio.run(line_index.locate_async(layout, request))


def test_a_fan_is_found_through_the_lean_path(make_event) -> None:
    event = make_event(slug="lean", capacity=0, rate_per_minute=0)
    entries = _joined(event.slug, 3)
    layout = event_layout(event.id)
    placement = _locate(layout, entries[2])
    assert (placement.where, placement.rank) == (Where.TIER, 2)


@cluster_only
def test_a_script_goes_to_its_slots_master(make_event) -> None:
    event = make_event(slug="direct", capacity=0, rate_per_minute=0)
    epoch_key = keys.epoch(event.id)
    master = client.client().get_node_from_key(epoch_key)

    async def direct_port() -> int:
        ready = await client.async_client_ready()
        assert isinstance(ready, AsyncRedisCluster)
        return client._slot_client(ready, epoch_key).connection_pool.connection_kwargs["port"]

    assert asyncio.run(direct_port()) == master.port


@cluster_only
def test_a_stale_slot_map_is_corrected_through_the_cluster_client(make_event) -> None:
    """The slot's entry in the map names another master (as after a failover the client has
    not heard of): that master answers MOVED, the script runs through the cluster client,
    which follows the redirection, and the map is right again for the next call."""
    event = make_event(slug="moved", capacity=0, rate_per_minute=0)
    entries = _joined(event.slug, 4)
    layout = event_layout(event.id)
    epoch_key = keys.epoch(event.id)

    async def scenario() -> tuple[int, int, line_index.Placement, int]:
        ready = await client.async_client_ready()
        assert isinstance(ready, AsyncRedisCluster)
        slot = ready.keyslot(epoch_key)
        right = ready.nodes_manager.get_node_from_slot(slot)
        wrong = next(node for node in ready.get_primaries() if node.name != right.name)
        ready.nodes_manager.slots_cache[slot] = [wrong]
        sent_to = client._slot_client(ready, epoch_key).connection_pool.connection_kwargs["port"]
        placement = await line_index.locate_async(
            layout,
            LocateRequest(member=entries[3], tier_id=layout.tiers[0].id, heartbeat_deadline=None),
        )
        after = client._slot_client(ready, epoch_key).connection_pool.connection_kwargs["port"]
        return sent_to, right.port, placement, after

    sent_to, right_port, placement, after = asyncio.run(scenario())
    assert sent_to != right_port
    assert (placement.where, placement.rank) == (Where.TIER, 3)
    assert after == right_port


@cluster_only
def test_a_slot_missing_from_the_map_goes_through_the_cluster_client(make_event) -> None:
    """During a failover the map may name no master for the slot at all (redis-py raises
    SlotNotCoveredError, which is not a RedisError): the call goes through the cluster
    client, which looks the map up again, or the fan is answered from PostgreSQL; never a
    crash of the lean path."""
    event = make_event(slug="uncovered", capacity=0, rate_per_minute=0)
    entries = _joined(event.slug, 2)
    layout = event_layout(event.id)
    epoch_key = keys.epoch(event.id)

    async def scenario() -> line_index.Placement | None:
        ready = await client.async_client_ready()
        assert isinstance(ready, AsyncRedisCluster)
        ready.nodes_manager.slots_cache[ready.keyslot(epoch_key)] = []
        try:
            return await line_index.locate_async(
                layout,
                LocateRequest(
                    member=entries[1], tier_id=layout.tiers[0].id, heartbeat_deadline=None
                ),
            )
        except client.HotIndexUnavailable:
            return None

    placement = asyncio.run(scenario())
    assert placement is None or (placement.where, placement.rank) == (Where.TIER, 1)
