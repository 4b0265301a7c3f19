"""The hot index on Redis Cluster, through django-redis: a connection factory that builds
redis-py's cluster client from the seeds in ``REDIS_URL``.

With ``REDIS_CLUSTER=1``, ``REDIS_URL`` lists one or more seed nodes, comma-separated; the
client finds the others itself and follows failovers. Every caller keeps asking django-redis
for its connection (``get_redis_connection("default")``) and gets a ``RedisCluster``: the
queue's code is the same for both. Each event's keys share one hash tag, so each script and
transaction touches one slot.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from django.core.exceptions import ImproperlyConfigured
from django_redis.pool import ConnectionFactory
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.backoff import ExponentialBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry


def seed_addresses(seeds: str) -> list[tuple[str, int]]:
    addresses = []
    for seed in seeds.split(","):
        parts = urlsplit(seed.strip())
        if parts.scheme not in ("redis", "") or not parts.hostname:
            raise ImproperlyConfigured(f"REDIS_URL: {seed!r} is not a redis://host:port seed")
        addresses.append((parts.hostname, parts.port or 6379))
    return addresses


def _retry() -> Retry:
    # A node that fails over answers MOVED or refuses: the client refreshes its slot map and
    # retries a little, then the caller degrades to PostgreSQL.
    return Retry(ExponentialBackoff(cap=0.2, base=0.05), retries=2)


def async_cluster_client(seeds: str, *, timeout: float, max_connections: int) -> AsyncRedisCluster:
    """The event loop's cluster client (the lean ASGI paths), like ``async_client``'s pool:
    ``max_connections`` per node, failing rather than waiting when they are all busy."""
    return AsyncRedisCluster(
        startup_nodes=[AsyncClusterNode(host, port) for host, port in seed_addresses(seeds)],
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        max_connections=max_connections,
        retry=_retry(),
    )


class SlotClients:
    """Plain asyncio clients to the cluster's masters, for the lean paths' one-slot scripts.

    The cluster client costs every command a second pass over its arguments (which slot, which
    node, which retry policy): in isolation, 13.7k against 15.1k EVALSHA a second from 64
    callers on a 2-CPU machine. A
    script whose keys share one hash tag needs none of it: ``for_key`` finds the slot's
    master in the cluster client's own slot map and answers a plain client to it. The map is
    the cluster client's: when a call to a master fails (MOVED after a failover, a refused
    connection), the caller sends it through the cluster client once, which follows the
    redirection and learns the new map that the next ``for_key`` reads.
    """

    def __init__(self, cluster: AsyncRedisCluster, *, timeout: float, max_connections: int) -> None:
        self._cluster = cluster
        self._timeout = timeout
        self._max_connections = max_connections
        self._by_node: dict[str, aioredis.Redis] = {}

    def for_key(self, key: str) -> aioredis.Redis:
        node = self._cluster.nodes_manager.get_node_from_slot(self._cluster.keyslot(key))
        node_client = self._by_node.get(node.name)
        if node_client is None:
            # Not a blocking pool, as for a single Redis: past the limit a call fails and
            # goes through the cluster client instead.
            pool = aioredis.ConnectionPool(
                host=node.host,
                port=node.port,
                max_connections=self._max_connections,
                socket_timeout=self._timeout,
                socket_connect_timeout=self._timeout,
            )
            node_client = aioredis.Redis(connection_pool=pool)
            self._by_node[node.name] = node_client
        return node_client


def cluster_client_options(options: dict[str, Any]) -> dict[str, Any]:
    """The cluster client's connection options, from the cache's OPTIONS."""
    pool = options.get("CONNECTION_POOL_KWARGS", {})
    return {
        "socket_timeout": options.get("SOCKET_TIMEOUT"),
        "socket_connect_timeout": options.get("SOCKET_CONNECT_TIMEOUT"),
        "max_connections": pool.get("max_connections", 200),
        "retry": _retry(),
    }


class ClusterConnectionFactory(ConnectionFactory):  # type: ignore[type-arg]
    """One ``RedisCluster`` per process for the seeds, shared like django-redis's pools."""

    _clusters: dict[str, RedisCluster] = {}

    def connect(self, url: str) -> RedisCluster:
        seeds = self.options["CLUSTER_SEEDS"]
        client = self._clusters.get(seeds)
        if client is None:
            client = RedisCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in seed_addresses(seeds)],
                **cluster_client_options(self.options),
            )
            self._clusters[seeds] = client
        return client

    def disconnect(self, connection: Any) -> None:
        connection.disconnect_connection_pools()
