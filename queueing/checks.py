"""Start-up checks: Redis must never evict the hot index (maxmemory-policy noeviction), its
key prefix must be this room's alone, and the keys that sign passes must open with the
configured encryption keys (``migrate`` and ``check --database default`` run that one)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError
from django.utils import timezone

from queueing.hot import keys
from queueing.hot.client import (
    HotIndexUnavailable,
    client,
    eviction_policies,
    unavailable_on_redis_error,
)
from queueing.models import PassKey
from queueing.passes.sealing import SealedKeyUnreadable, private_key_open


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


def _keys_that_sign(now: datetime) -> list[tuple[str, str]]:
    """(kid, sealed key) of the key signing at ``now`` and of those waiting to sign; keys
    still in plain PEM are left to the migration that seals them."""
    signing_since = (
        PassKey.objects.filter(activates_at__lte=now)
        .order_by("-activates_at", "-id")
        .values_list("activates_at", flat=True)
        .first()
    )
    keys = PassKey.objects.exclude(private_key_sealed__startswith="-----BEGIN")
    if signing_since is not None:
        keys = keys.filter(activates_at__gte=signing_since)
    return list(keys.values_list("kid", "private_key_sealed"))


@checks.register(checks.Tags.database)
def pass_keys_open(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The key signing passes, and any waiting to sign, must open: otherwise every admission
    fails to hand out its pass. Found at ``migrate`` (the compose file's first step) after an
    encryption key was dropped too early or mistyped, rather than by the first fan let in.
    Like Django's own database checks, only when the caller names the database."""
    if not databases or "default" not in databases:
        return []
    try:
        keys = _keys_that_sign(timezone.now())
    except DatabaseError:
        return []  # no table yet: migrate creates it, with nothing to open
    errors = []
    for kid, sealed in keys:
        try:
            private_key_open(sealed)
        except SealedKeyUnreadable:
            errors.append(
                checks.Error(
                    f"The pass-signing key {kid} cannot be opened with "
                    "WR_PASS_KEY_ENCRYPTION_KEY: passes cannot be signed.",
                    hint=(
                        "Put the encryption key that sealed it back in the list (second), then "
                        "run `manage.py reseal_pass_keys` before dropping it "
                        "(docs/configuration.md, 'Rotating the pass-key encryption key')."
                    ),
                    id="queueing.E003",
                )
            )
    return errors
