"""Atomic counters for abuse controls: sliding-window rate limits, spend-once keys, and
failure budgets with lockouts (password logins)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from queueing.hot.client import client, run_script, unavailable_on_redis_error


def _rate_limit(key: str, *, now: float, window: float, limit: int, record: bool) -> float | None:
    allowed, retry = run_script(
        "rate_limit",
        keys=[key],
        args=[repr(now), repr(window), limit, secrets.token_hex(8), "1" if record else "0"],
    )
    return None if allowed else float(retry)


@unavailable_on_redis_error
def rate_limit_hit(key: str, *, now: float, window: float, limit: int) -> float | None:
    """Record a call; None if allowed, else the seconds to wait (a refused call is not
    recorded)."""
    return _rate_limit(key, now=now, window=window, limit=limit, record=True)


@unavailable_on_redis_error
def rate_limit_peek(key: str, *, now: float, window: float, limit: int) -> float | None:
    """Whether a call would be allowed now, without recording one: None if so, else the
    seconds to wait."""
    return _rate_limit(key, now=now, window=window, limit=limit, record=False)


@unavailable_on_redis_error
def spend_once(key: str, *, ttl_seconds: int) -> bool:
    """True the first time ``key`` is spent, False ever after (until it expires)."""
    return bool(client().set(key, "1", nx=True, ex=ttl_seconds))


@dataclass(frozen=True)
class Lockout:
    """A caller locked out of password logins."""

    seconds: float  # until it ends
    started: bool  # this call started it (it is recorded once)
    failures: int  # failures that started it (0 when it was already running)


@unavailable_on_redis_error
def lockout_count(
    failures_key: str,
    lock_key: str,
    *,
    now: float,
    window: float,
    limit: int,
    lockout_seconds: float,
    attempt: str | None,
) -> Lockout | None:
    """The lockout the caller is in, if any. Before a password check (``attempt`` its unique
    id): the attempt counts as a failure until ``lockout_forget``. After a failed check
    (``attempt`` None): it stays counted, and the lock is decided again."""
    wait, started, failures = run_script(
        "lockout_count",
        keys=[failures_key, lock_key],
        args=[repr(now), repr(window), limit, repr(lockout_seconds), attempt or ""],
    )
    if float(wait) <= 0:
        return None
    return Lockout(seconds=float(wait), started=bool(started), failures=int(failures))


@unavailable_on_redis_error
def lockout_forget(failures_key: str, *, attempt: str | None = None) -> None:
    """Stop counting one attempt, or (``attempt`` None) every failure of the caller. A lockout
    already running stays."""
    if attempt is None:
        client().delete(failures_key)
    else:
        client().zrem(failures_key, attempt)


@unavailable_on_redis_error
def lockout_lift(failures_key: str, lock_key: str) -> bool:
    """End a caller's lockout and forget its failures; True if a lockout was running."""
    pipe = client().pipeline(transaction=False)
    pipe.delete(lock_key)
    pipe.delete(failures_key)
    lifted, _ = pipe.execute()
    return bool(lifted)
