"""Start-up checks: Redis must never evict the hot index (maxmemory-policy noeviction), and
its key prefix must be this room's alone."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from queueing.hot import keys
from queueing.hot.client import (
    HotIndexUnavailable,
    client,
    eviction_policies,
    unavailable_on_redis_error,
)


@checks.register("redis")
def redis_eviction_policy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    try:
        policies = eviction_policies()
    except HotIndexUnavailable as exc:
        return [
            checks.Warning(
                f"Redis is unreachable ({exc}); the hot index will be rebuilt when it returns.",
                id="queueing.W001",
            )
        ]
    return [
        checks.Error(
            f"Redis maxmemory-policy is {policy!r} on {node}: it could silently evict fans' "
            "places.",
            hint="Run every Redis node with maxmemory-policy noeviction.",
            id="queueing.E001",
        )
        for node, policy in sorted(policies.items())
        if policy != "noeviction"
    ]


# One PostgreSQL server, however this machine names it.
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}


def room_database() -> str:
    """This room's database as host:port/name: what its Redis key prefix is claimed for."""
    database = settings.DATABASES["default"]
    host = database.get("HOST") or "localhost"
    host = "localhost" if host in _LOOPBACK else host
    return f"{host}:{database.get('PORT') or 5432}/{database['NAME']}"


@unavailable_on_redis_error
def prefix_owner_claim(owner: str) -> str:
    """Claim this room's key prefix for ``owner`` (its database) unless another owner holds
    it; the owner that holds it, either way."""
    redis_client = client()
    redis_client.set(keys.room_owner(), owner, nx=True)
    held = redis_client.get(keys.room_owner())
    return held.decode() if isinstance(held, bytes) else str(held)


@checks.register("redis")
def redis_prefix_is_this_rooms(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Two rooms on one Redis under one prefix would read each other's lines by on-sale id
    and send their ticks to each other's pages: the first room to check claims the prefix,
    and any other database is refused here (``migrate`` runs this, so ``make run`` and the
    compose file's migration stop)."""
    try:
        owner = prefix_owner_claim(room_database())
    except HotIndexUnavailable:
        return []  # redis_eviction_policy already says Redis is unreachable
    if owner == room_database():
        return []
    return [
        checks.Error(
            f"The Redis key prefix {settings.WR_REDIS_PREFIX!r} belongs to the room of "
            f"database {owner}, not to this one ({room_database()}).",
            hint=(
                "Give each room its own WR_REDIS_PREFIX (README, 'A second room on one "
                "machine'), or point this one at that room's database. If that room is gone "
                f"for good, delete the Redis key {keys.room_owner()!r}."
            ),
            id="queueing.E002",
        )
    ]
