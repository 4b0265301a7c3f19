"""Is Redis there, and is it configured never to evict the index?"""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

from queueing.hot.client import client, unavailable_on_redis_error


@unavailable_on_redis_error
def ping() -> None:
    client().ping()


@unavailable_on_redis_error
def eviction_policies() -> dict[str, str]:
    """Each Redis node's ``maxmemory-policy``, by node. On a cluster every node is asked,
    replicas too (one of them is the master after a failover); one node's answer is not
    the others'."""
    redis_client = client()
    if not isinstance(redis_client, RedisCluster):
        return {"redis": _policy(redis_client)}
    # CLUSTER NODES, not the client's slot map: the map may list masters only.
    policies = {}
    for address in redis_client.cluster_nodes():
        # "host:port", an IPv6 host in brackets: the port is after the last colon.
        host, _, port = address.rpartition(":")
        with redis.Redis(host=host.strip("[]"), port=int(port), socket_timeout=2) as node:
            policies[address] = _policy(node)
    return policies


def _policy(redis_client: redis.Redis) -> str:
    return str(redis_client.config_get("maxmemory-policy").get("maxmemory-policy", ""))
