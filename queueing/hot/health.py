"""Is Redis there, and is it configured never to evict the index?"""

from __future__ import annotations

from queueing.hot.client import client, unavailable_on_redis_error


@unavailable_on_redis_error
def ping() -> None:
    client().ping()


@unavailable_on_redis_error
def eviction_policy() -> str:
    return str(client().config_get("maxmemory-policy").get("maxmemory-policy", ""))
