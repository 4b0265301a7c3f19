"""Start-up check: Redis must never evict the hot index (maxmemory-policy noeviction)."""

from __future__ import annotations

from typing import Any

from django.core import checks

from queueing.hot.client import HotIndexUnavailable, eviction_policies


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
