"""Failed password logins of staff, throttled per account and per client address.

Every password login of the room goes through the admin's login form (``/dashboard/`` sends
staff there), which calls these around its password check:

- ``login_attempt_begin`` before it: refuses while the account or the address is locked out,
  and counts the attempt as a failure until it is known to have succeeded, so a parallel burst
  cannot check more passwords than the budget (``queueing/hot/lua/lockout_count.lua``);
- ``login_attempt_failed`` after a refused password: the budget that reaches its limit
  (``WR_LOGIN_FAILURES_PER_ACCOUNT`` / ``_PER_ADDRESS`` within
  ``WR_LOGIN_FAILURE_WINDOW_SECONDS``) locks out for ``WR_LOGIN_LOCKOUT_SECONDS``, right
  password included;
- ``login_attempt_succeeded``: the account's failures are forgotten (as Queue-it and
  django-axes do); the address's are not, so one good account does not launder an address
  trying many.

Refusals are ``RateLimited`` with ``retry_after``. A lockout is recorded once, when it starts:
a ``LoginLockout`` row and a WARNING line on the ``waitingroom.security`` logger. The counters
live in Redis; while it is unreachable logins go unthrottled (fail open, logged) rather than
locking every staff member out of steering a live on-sale.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import math
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn

from django.conf import settings
from django.http import HttpRequest

from dashboard.models import LockoutScope, LoginLockout
from queueing.hot import lockouts
from queueing.hot.client import HotIndexUnavailable
from queueing.rules.errors import RateLimited
from queueing.web.callers import client_ip, rate_key_for_ip

logger = logging.getLogger("waitingroom.security")


@dataclass(frozen=True)
class _Budget:
    scope: LockoutScope
    caller: str
    limit: int


@dataclass(frozen=True)
class LoginAttempt:
    """One password check under way, and the budgets it was counted against."""

    username: str
    address: str
    address_bucket: str
    attempt_id: str
    budgets: tuple[_Budget, ...]


def lockout_message(seconds: float) -> str:
    minutes = max(1, math.ceil(seconds / 60))
    unit = "minute" if minutes == 1 else "minutes"
    return f"Too many failed logins for this account or address; try again in {minutes} {unit}."


def _refusal(seconds: float) -> RateLimited:
    return RateLimited(lockout_message(seconds), retry_after=max(1, math.ceil(seconds)))


def _account(username: str) -> str:
    # A digest: usernames are the attacker's text, and keys stay short and brace-free.
    return hashlib.sha256(username.encode()).hexdigest()


def _budgets(username: str, address_bucket: str) -> tuple[_Budget, ...]:
    budgets = (
        _Budget(LockoutScope.ACCOUNT, _account(username), settings.WR_LOGIN_FAILURES_PER_ACCOUNT),
        _Budget(LockoutScope.ADDRESS, address_bucket, settings.WR_LOGIN_FAILURES_PER_ADDRESS),
    )
    return tuple(budget for budget in budgets if budget.limit)


@contextlib.contextmanager
def _unthrottled_while_redis_away(step: str, attempt: LoginAttempt) -> Iterator[None]:
    """Fail open: while the counters cannot be reached the rest of ``step`` is skipped and
    logged, and the login goes on unthrottled."""
    try:
        yield
    except HotIndexUnavailable as exc:
        logger.warning(
            "login_throttle_unavailable",
            extra={
                "step": step,
                "username": attempt.username,
                "address": attempt.address,
                "error": str(exc),
            },
        )


def login_lockout_record(
    *, attempt: LoginAttempt, scope: LockoutScope, lockout: lockouts.Lockout, now: float
) -> LoginLockout:
    at = dt.datetime.fromtimestamp(now, tz=dt.UTC)
    record = LoginLockout.objects.create(
        at=at,
        scope=scope,
        username=attempt.username[:150],
        address=attempt.address[:64],
        address_bucket=attempt.address_bucket[:64],
        failures=lockout.failures,
        locked_until=at + dt.timedelta(seconds=lockout.seconds),
    )
    # Fields, not text: the log's formatter escapes whatever the username holds (one line per
    # lockout, always, in JSON; config/logs.py).
    logger.warning(
        "login_lockout",
        extra={
            "scope": scope.value,
            "username": attempt.username,
            "address": attempt.address,
            "address_bucket": attempt.address_bucket,
            "failures": lockout.failures,
            "lockout_seconds": round(lockout.seconds),
            "locked_until": record.locked_until.isoformat(),
            "record_id": record.pk,
        },
    )
    return record


def _locked(attempt: LoginAttempt, budget: _Budget, lockout: lockouts.Lockout, now: float) -> None:
    if lockout.started:
        login_lockout_record(attempt=attempt, scope=budget.scope, lockout=lockout, now=now)


def _refuse_unchecked(
    attempt: LoginAttempt,
    budget: _Budget,
    lockout: lockouts.Lockout,
    *,
    reserved: list[_Budget],
    now: float,
) -> NoReturn:
    _locked(attempt, budget, lockout, now)
    # No password is checked: the budgets counted so far get their attempt back.
    for counted in reserved:
        with _unthrottled_while_redis_away("begin", attempt):
            lockouts.lockout_forget(counted.scope.value, counted.caller, attempt=attempt.attempt_id)
    raise _refusal(lockout.seconds)


def _count(budget: _Budget, *, now: float, attempt: str | None) -> lockouts.Lockout | None:
    return lockouts.lockout_count(
        budget.scope.value,
        budget.caller,
        now=now,
        window=settings.WR_LOGIN_FAILURE_WINDOW_SECONDS,
        limit=budget.limit,
        lockout_seconds=settings.WR_LOGIN_LOCKOUT_SECONDS,
        attempt=attempt,
    )


def login_attempt_begin(*, request: HttpRequest, username: str, now: float) -> LoginAttempt:
    """Before checking ``username``'s password; raises ``RateLimited`` while locked out."""
    address = client_ip(request)
    bucket = rate_key_for_ip(address)
    attempt = LoginAttempt(
        username=username,
        address=address,
        address_bucket=bucket,
        attempt_id=secrets.token_hex(8),
        budgets=_budgets(username, bucket),
    )
    reserved: list[_Budget] = []
    with _unthrottled_while_redis_away("begin", attempt):
        for budget in attempt.budgets:
            lockout = _count(budget, now=now, attempt=attempt.attempt_id)
            if lockout is not None:
                _refuse_unchecked(attempt, budget, lockout, reserved=reserved, now=now)
            reserved.append(budget)
    return attempt


def login_attempt_failed(*, attempt: LoginAttempt, now: float) -> None:
    """After a refused password; raises ``RateLimited`` when that locked the caller out."""
    longest: lockouts.Lockout | None = None
    with _unthrottled_while_redis_away("failed", attempt):
        for budget in attempt.budgets:
            lockout = _count(budget, now=now, attempt=None)
            if lockout is not None:
                _locked(attempt, budget, lockout, now)
                if longest is None or lockout.seconds > longest.seconds:
                    longest = lockout
    if longest is not None:
        raise _refusal(longest.seconds)


def login_attempt_succeeded(*, attempt: LoginAttempt) -> None:
    """After a login: the account starts afresh; the address keeps its failures."""
    with _unthrottled_while_redis_away("succeeded", attempt):
        for budget in attempt.budgets:
            forgotten = None if budget.scope == LockoutScope.ACCOUNT else attempt.attempt_id
            lockouts.lockout_forget(budget.scope.value, budget.caller, attempt=forgotten)


def login_lockout_lift(*, username: str | None = None, address: str | None = None) -> list[str]:
    """End the lockouts of an account and/or an address (and forget their failures), for an
    operator; names the lockouts that were running."""
    named: list[tuple[str, _Budget]] = []
    if username is not None:
        named.append((username, _Budget(LockoutScope.ACCOUNT, _account(username), 0)))
    if address is not None:
        bucket = rate_key_for_ip(address)
        named.append((bucket, _Budget(LockoutScope.ADDRESS, bucket, 0)))
    return [
        f"{budget.scope.value} {name}"
        for name, budget in named
        if lockouts.lockout_lift(budget.scope.value, budget.caller)
    ]


def login_lockouts_purge(*, now: dt.datetime, keep_days: int) -> int:
    """Remove the lockout records (who, from which address) that ended more than
    ``keep_days`` ago; how many. The running lockouts themselves live in Redis and end by
    their own TTL (``queueing/hot/lockouts.py``)."""
    removed, _ = LoginLockout.objects.filter(
        locked_until__lt=now - dt.timedelta(days=keep_days)
    ).delete()
    return removed
