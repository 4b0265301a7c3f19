"""Join rate limits per client IP and per identity, kept atomically in Redis.

Unlike a read-then-write throttle, a burst of parallel joins cannot slip past the limit: each
call is counted and judged in one script. The identity limit only slows down one client
hammering join (a client chooses its identity); the IP limit is the one that binds bots.

The client IP (of a request, or of a WebSocket's scope) is the peer's address, or, behind
trusted proxies, the address the nearest trusted proxy saw (``WR_TRUSTED_PROXY_COUNT`` hops
from the right of ``X-Forwarded-For``). If Redis is down, joins are not refused for it.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from queueing.hot import keys, limits
from queueing.hot.client import HotIndexUnavailable
from queueing.rules.errors import RateLimited

WINDOW_SECONDS = 60.0


def client_ip(request: HttpRequest) -> str:
    return client_ip_from(
        request.META.get("REMOTE_ADDR", ""), request.headers.get("X-Forwarded-For", "")
    )


def scope_client_ip(scope: Mapping[str, Any]) -> str:
    """``client_ip`` for an ASGI scope (a WebSocket's), by the same trusted-proxy rule."""
    client = scope.get("client")
    remote = str(client[0]) if client else ""
    # Repeated headers count as one comma-separated list, as Django joins them.
    forwarded = ",".join(
        value.decode("latin-1")
        for name, value in scope.get("headers", ())
        if name.lower() == b"x-forwarded-for"
    )
    return client_ip_from(remote, forwarded)


def client_ip_from(remote: str, forwarded_for: str) -> str:
    remote = remote or "unknown"
    hops = settings.WR_TRUSTED_PROXY_COUNT
    if not hops:
        return remote
    forwarded = [part.strip() for part in forwarded_for.split(",")]
    forwarded = [part for part in forwarded if part]
    # The last `hops` entries were added by our own proxies; the one before them is the
    # address our outermost proxy saw. Anything further left is the client's to invent.
    if len(forwarded) < hops:
        return remote
    candidate = forwarded[-hops]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote


def rate_key_for_ip(address: str) -> str:
    """One bucket per IPv4 address, per IPv6 /64 (what one subscriber usually holds)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _refuse(retry_after: float) -> RateLimited:
    return RateLimited(
        "Too many attempts to join. Please wait a moment.",
        retry_after=max(1, math.ceil(retry_after)),
    )


def join_rate_check(*, request: HttpRequest, identity: str) -> None:
    now = time.time()
    budgets = (
        ("ip", rate_key_for_ip(client_ip(request)), settings.WR_JOIN_LIMIT_PER_IP),
        ("id", identity, settings.WR_JOIN_LIMIT_PER_IDENTITY),
    )
    for scope, caller, limit in budgets:
        if not limit:
            continue
        try:
            wait = limits.rate_limit_hit(
                keys.join_rate(scope, caller), now=now, window=WINDOW_SECONDS, limit=limit
            )
        except HotIndexUnavailable:
            return
        if wait is not None:
            raise _refuse(wait)
