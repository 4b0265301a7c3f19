"""Failure budgets with lockouts, for the staff's password logins: per caller (an account
digest, or an address bucket), a sliding window of failed attempts and the lock they start
(``lua/lockout_count.lua``)."""

from __future__ import annotations

from dataclasses import dataclass

from queueing.hot import keys
from queueing.hot.client import client, run_script, unavailable_on_redis_error


@dataclass(frozen=True)
class Lockout:
    """A caller locked out of password logins."""

    seconds: float  # until it ends
    started: bool  # this call started it (it is recorded once)
    failures: int  # failures that started it (0 when it was already running)


@unavailable_on_redis_error
def lockout_count(
    scope: str,
    caller: str,
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
        keys=[keys.login_failures(scope, caller), keys.login_lock(scope, caller)],
        args=[repr(now), repr(window), limit, repr(lockout_seconds), attempt or ""],
    )
    if float(wait) <= 0:
        return None
    return Lockout(seconds=float(wait), started=bool(started), failures=int(failures))


@unavailable_on_redis_error
def lockout_forget(scope: str, caller: str, *, attempt: str | None = None) -> None:
    """Stop counting one attempt, or (``attempt`` None) every failure of the caller. A lockout
    already running stays."""
    failures_key = keys.login_failures(scope, caller)
    if attempt is None:
        client().delete(failures_key)
    else:
        client().zrem(failures_key, attempt)


@unavailable_on_redis_error
def lockout_lift(scope: str, caller: str) -> bool:
    """End a caller's lockout and forget its failures; True if a lockout was running."""
    pipe = client().pipeline(transaction=False)
    pipe.delete(keys.login_lock(scope, caller))
    pipe.delete(keys.login_failures(scope, caller))
    lifted, _ = pipe.execute()
    return bool(lifted)
