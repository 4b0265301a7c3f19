"""Atomic counters for the fans' abuse controls: sliding-window rate limits (joins, wrong
access codes, place links, turn-mail addresses), spend-once keys (proof-of-work challenges)
and keys held by one owner (the address a turn mail goes to)."""

from __future__ import annotations

import secrets

from queueing.hot.client import client, fails_open, run_script, unavailable_on_redis_error


def _rate_limit(key: str, *, now: float, window: float, limit: int, record: bool) -> float | None:
    allowed, retry = run_script(
        "rate_limit",
        keys=[key],
        args=[repr(now), repr(window), limit, secrets.token_hex(8), "1" if record else "0"],
    )
    return None if allowed else float(retry)


@fails_open(None)  # Redis away: nobody is refused for it
@unavailable_on_redis_error
def rate_limit_hit(key: str, *, now: float, window: float, limit: int) -> float | None:
    """Record a call; None if allowed, else the seconds to wait (a refused call is not
    recorded)."""
    return _rate_limit(key, now=now, window=window, limit=limit, record=True)


@fails_open(None)
@unavailable_on_redis_error
def rate_limit_peek(key: str, *, now: float, window: float, limit: int) -> float | None:
    """Whether a call would be allowed now, without recording one: None if so, else the
    seconds to wait."""
    return _rate_limit(key, now=now, window=window, limit=limit, record=False)


@fails_open(True)  # reuse cannot be told apart without Redis; the work was still done
@unavailable_on_redis_error
def spend_once(key: str, *, ttl_seconds: int) -> bool:
    """True the first time ``key`` is spent, False ever after (until it expires)."""
    return bool(client().set(key, "1", nx=True, ex=ttl_seconds))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@fails_open(None)  # Redis away: nobody is refused for it
@unavailable_on_redis_error
def claim_hold(key: str, *, owner: str, ttl_seconds: int, stale_holder: str = "") -> str | None:
    """Hold ``key`` for ``owner`` unless another holds it (``stale_holder``, one the caller
    found to no longer need it, is replaced); the expiry starts again. The holder after the
    call: ``owner`` when it holds the key now."""
    return _text(run_script("claim", keys=[key], args=[owner, ttl_seconds, stale_holder]))


@fails_open(None)  # the key expires by itself
@unavailable_on_redis_error
def claim_release(key: str, *, owner: str) -> None:
    """Give ``key`` up, if ``owner`` still holds it."""
    run_script("release_lock", keys=[key], args=[owner])
