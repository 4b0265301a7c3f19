"""Passes checked without PostgreSQL, for the gate (a sub-request on every request to a
protected shop): the published keys are held in-process, and so are the claims of the tokens
whose signature has already been verified.

Both are safe to keep. A key is published ``KEY_PREPUBLISH`` (10 minutes) before it signs, so
keys read ``KEYS_SECONDS`` ago know every key a pass can be signed with; an unknown ``kid``
reads them again, at most once per ``KEYS_REFRESH_SECONDS``, so a forged ``kid`` cannot turn
every request into a query. A verified token's signature and claims cannot change; its
expiry is checked against the clock on every use. Forged tokens are not remembered: an
attacker could otherwise fill the cache and push real passes out.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from asgiref.sync import sync_to_async
from django.test.signals import setting_changed

from queueing.in_process import ProcessCache, closes_old_connections
from queueing.models import PassKey
from queueing.passes.signing import (
    CLOCK_LEEWAY_SECONDS,
    PassClaims,
    PassInvalid,
    pass_decode,
    published_keys,
)

KEYS_SECONDS = 60.0
KEYS_REFRESH_SECONDS = 1.0
# Tokens remembered per process (a token is about 400 bytes: a few megabytes at most).
VERIFIED_MAX = 10_000

# One entry (None): the published keys, with when they were read.
_keys: ProcessCache[None, tuple[PassKey, ...]] = ProcessCache("pass keys")
_verified: ProcessCache[str, PassClaims] = ProcessCache("verified passes", max_entries=VERIFIED_MAX)


def _clear_on_change(*, setting: str, **kwargs: object) -> None:
    if setting == "WR_PUBLIC_URL":  # the issuer every pass is checked against
        _keys.clear()
        _verified.clear()


setting_changed.connect(_clear_on_change)


def _remembered(token: str, now: float) -> PassClaims | None:
    """The claims of a token verified before, checked for expiry as pass_decode checks it."""
    found = _verified.kept(token)
    claims = found[0] if found is not None else None
    if claims is not None and claims.expires_at.timestamp() <= now - CLOCK_LEEWAY_SECONDS:
        raise PassInvalid("expired")
    return claims


def _keys_held(*, refresh: bool) -> tuple[PassKey, ...] | None:
    """The keys read recently enough; None when they must be read (again)."""
    found = _keys.kept(None)
    if found is None:
        return None
    keys, age = found
    if age > KEYS_SECONDS or (refresh and age > KEYS_REFRESH_SECONDS):
        return None
    return keys


def _keys_read() -> tuple[PassKey, ...]:
    read_at = time.monotonic()
    return _keys.put(None, tuple(published_keys(now=datetime.now(UTC))), kept_at=read_at)


@closes_old_connections
def _keys_read_in_thread() -> tuple[PassKey, ...]:
    return _keys_read()


def _verify(token: str, now: float, keys: tuple[PassKey, ...]) -> PassClaims:
    return _verified.put(token, pass_decode(token, now=datetime.fromtimestamp(now, UTC), keys=keys))


async def pass_claims_async(token: str, *, now: float) -> PassClaims:
    """``pass_decode`` from the event loop; PostgreSQL is read (in a thread) only for the
    keys, when they are old or a ``kid`` is unknown. Raises PassInvalid, or DatabaseError
    when the keys must be read and cannot be."""
    claims = _remembered(token, now)
    if claims is not None:
        return claims
    keys = _keys_held(refresh=False) or await sync_to_async(_keys_read_in_thread)()
    try:
        return _verify(token, now, keys)
    except PassInvalid as invalid:
        if invalid.reason != "bad_signature" or _keys_held(refresh=True) is not None:
            raise
    # A kid or key this process has not seen: perhaps one rotated in since the last read.
    return _verify(token, now, await sync_to_async(_keys_read_in_thread)())


def pass_claims(token: str, *, now: float) -> PassClaims:
    """``pass_claims_async`` for synchronous code (the gate's Django view)."""
    claims = _remembered(token, now)
    if claims is not None:
        return claims
    keys = _keys_held(refresh=False) or _keys_read()
    try:
        return _verify(token, now, keys)
    except PassInvalid as invalid:
        if invalid.reason != "bad_signature" or _keys_held(refresh=True) is not None:
            raise
    return _verify(token, now, _keys_read())
