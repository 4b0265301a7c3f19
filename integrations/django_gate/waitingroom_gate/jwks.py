"""The room's public keys (its JWKS), fetched over HTTP and cached in the process.

- Keys are served from memory for ``ttl`` seconds after a successful fetch.
- A ``kid`` that is not in the cache triggers a refetch, because the room may have rotated
  its key with a shorter notice than our cache. Refetches of any kind are at most one per
  ``min_refetch`` seconds, so passes with made-up ``kid``s cannot make the shop hammer the room.
- When the room cannot be reached (or answers with something that is not a JWKS), the last
  good keys are kept until ``stale_for`` seconds after they went past their ``ttl``; after
  that there are no keys and every pass is refused (fail closed).
- One fetch at a time per process. Lookups of known keys never wait for it (past their
  lifetime they go on with the keys they have while one thread fetches); lookups of an
  unknown ``kid`` wait for the fetch in flight instead of sending their own.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from jwt.algorithms import OKPAlgorithm
from jwt.exceptions import InvalidKeyError

logger = logging.getLogger("waitingroom_gate")

# A JWKS is a few hundred bytes per key; anything much larger is not the room's.
MAX_JWKS_BYTES = 256 * 1024

Keys = dict[str, Ed25519PublicKey]
Fetch = Callable[[str, float], bytes]


class JwksUnavailable(Exception):
    """The room's JWKS could not be had (unreachable, an error status, or not a JWKS)."""


def http_fetch(url: str, timeout: float) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(MAX_JWKS_BYTES + 1)
    except urllib.error.HTTPError as error:
        raise JwksUnavailable(f"the room answered {error.code}") from error
    # URLError, timeouts and resets are OSErrors; a cut-off body is an HTTPException.
    except (OSError, http.client.HTTPException) as error:
        raise JwksUnavailable(str(error)) from error
    if len(body) > MAX_JWKS_BYTES:
        raise JwksUnavailable("the JWKS is too large")
    return body


def _ed25519_key(jwk: Any) -> tuple[str, Ed25519PublicKey] | None:
    """The (kid, key) of a signing Ed25519 JWK; None for anything else, which we ignore."""
    if not isinstance(jwk, dict):
        return None
    kid = jwk.get("kid")
    if not isinstance(kid, str) or not kid:
        return None
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        return None
    if jwk.get("use", "sig") != "sig" or jwk.get("alg", "EdDSA") != "EdDSA":
        return None
    try:
        key = OKPAlgorithm.from_jwk(jwk)
    except (InvalidKeyError, ValueError, TypeError):
        return None
    # A JWK with a "d" loads as a private key: only public keys verify passes.
    if not isinstance(key, Ed25519PublicKey):
        return None
    return kid, key


def jwks_parse(body: bytes) -> Keys:
    try:
        document = json.loads(body)
    except ValueError as error:
        raise JwksUnavailable("the JWKS is not JSON") from error
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksUnavailable('the JWKS has no "keys" list')
    return dict(filter(None, (_ed25519_key(jwk) for jwk in document["keys"])))


class JwksCache:
    def __init__(
        self,
        url: str,
        *,
        ttl: float = 300.0,
        min_refetch: float = 10.0,
        stale_for: float = 86_400.0,
        timeout: float = 3.0,
        fetch: Fetch = http_fetch,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.ttl = ttl
        self.min_refetch = min_refetch
        self.stale_for = stale_for
        self.timeout = timeout
        self._fetch = fetch
        self._clock = clock
        # Held while fetching, and while deciding whether to; lookups read without it.
        self._fetch_lock = threading.Lock()
        # The keys and when they were fetched, replaced together (one assignment), so that a
        # lookup never sees new keys with an old time or the reverse.
        self._current: tuple[Keys, float | None] = ({}, None)
        self._attempted_at: float | None = None  # last fetch, successful or not
        self.fetches = 0  # attempts so far, for tests and operators

    def key(self, kid: str) -> Ed25519PublicKey | None:
        """The public key named ``kid``, or None when the room does not publish it."""
        now = self._clock()
        keys, fetched_at = self._current
        if kid in keys:
            if self._expired(fetched_at, now) and self._fetch_lock.acquire(blocking=False):
                # Past their lifetime: one thread fetches, the others go on with the keys
                # they have instead of waiting for a room that may be slow or down.
                try:
                    self._refresh_if_allowed(now)
                finally:
                    self._fetch_lock.release()
            return self._lookup(kid, now)
        # Unknown: wait for a fetch in flight (its answer may have the key), else make one.
        with self._fetch_lock:
            self._refresh_if_allowed(now)
        return self._lookup(kid, now)

    def usable(self) -> bool:
        """Whether there are keys to check passes with: fetched, and not past their lifetime
        and the stale time (a refetch is tried first, within the rate limit). False is the
        room unreachable for this gate (room_outage.py)."""
        now = self._clock()
        fetched_at = self._current[1]
        if self._fresh_enough(fetched_at, now):
            return True
        if fetched_at is None:
            with self._fetch_lock:  # at start-up: wait for the first answer rather than refuse
                self._refresh_if_allowed(now)
        elif self._fetch_lock.acquire(blocking=False):
            # Keys gone stale: one thread asks, the others do not queue behind a room that
            # may take its whole timeout to fail.
            try:
                self._refresh_if_allowed(now)
            finally:
                self._fetch_lock.release()
        return self._fresh_enough(self._current[1], now)

    def _fresh_enough(self, fetched_at: float | None, now: float) -> bool:
        return fetched_at is not None and now - fetched_at < self.ttl + self.stale_for

    def _lookup(self, kid: str, now: float) -> Ed25519PublicKey | None:
        keys, fetched_at = self._current
        if not self._fresh_enough(fetched_at, now):
            return None  # no keys, or the last good ones are too old
        return keys.get(kid)

    def _expired(self, fetched_at: float | None, now: float) -> bool:
        return fetched_at is None or now - fetched_at >= self.ttl

    def _refresh_if_allowed(self, now: float) -> None:
        """Fetch, unless any fetch was attempted less than ``min_refetch`` ago (the caller
        holds the fetch lock)."""
        if self._attempted_at is not None and now - self._attempted_at < self.min_refetch:
            return
        self._attempted_at = now
        self.fetches += 1
        try:
            keys = jwks_parse(self._fetch(self.url, self.timeout))
        except JwksUnavailable as error:
            # The last good keys stay (see _lookup): a pass signed by the room an hour ago is
            # no less genuine because the room is down now.
            logger.warning("waiting room JWKS unavailable at %s: %s", self.url, error)
            return
        self._current = (keys, now)
