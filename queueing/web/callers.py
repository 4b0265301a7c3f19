"""Who is asking: the fan's identity, and the client's address.

- **Identity** (who is joining): a logged-in user, else the signed waiting-room cookie, else
  the ``Idempotency-Key`` header; a browser without any of them gets a new cookie. What is
  kept is a digest.
- **The client's address** (of a request, or of a WebSocket's scope): the peer's, or, behind
  trusted proxies, the address the nearest trusted proxy saw (``WR_TRUSTED_PROXY_COUNT`` hops
  from the right of ``X-Forwarded-For``); its bucket (an IPv4 address, an IPv6 /64) and the
  keyed digest the room keeps of it. The join limits, the sockets' caps, the staff login's
  lockouts and ``/metrics`` all judge the same address by the same rule, and none of them
  reaches into another's checks for it.
- **The device** (whether it is a phone or a tablet): the page does not offer such a device to
  "continue on your phone".
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import logging
import re
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.crypto import salted_hmac

from queueing.rules.lanes import first_in_lane
from queueing.web.api_errors import ApiError

logger = logging.getLogger(__name__)

# -------------------------------------------------------------------- the shop's key


def bearer_key(request: HttpRequest) -> str:
    """The integration key a shop sends as ``Authorization: Bearer <key>`` (``passes/complete``,
    ``sold-out``, ``traffic-rules``); 401 without one. Whose key it is, the caller checks."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key:
        raise ApiError(401, "unauthorized", "Send the on-sale's integration key as a Bearer token.")
    return key


# -------------------------------------------------------------------- identity

_COOKIE_SALT = "waitingroom.identity.v1"
_IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")


@dataclass(frozen=True)
class Identity:
    digest: str  # what is stored: sha256 of "<kind>:<value>"
    new_cookie_token: str | None  # set on the response when the identity is a new cookie
    cookie_name: str = ""  # the cookie it is set in ("": the room's, WR_IDENTITY_COOKIE)


def identity_cookie_name(event_id: int | None = None) -> str:
    """The room's identity cookie, or an on-sale's own (lines of several lanes)."""
    if event_id is None:
        return settings.WR_IDENTITY_COOKIE
    return f"{settings.WR_IDENTITY_COOKIE}_{event_id}"


def _digest(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value}".encode()).hexdigest()


def identity_from_request(
    request: HttpRequest, *, lanes: int = 1, event_id: int | None = None
) -> Identity:
    """Who is asking: a logged-in user, else the browser's identity cookie, else the
    ``Idempotency-Key``; a browser without any of them gets a new cookie.

    Joining a line of several lanes (``lanes``, of the on-sale ``event_id``), the browser's
    cookie is that on-sale's own, and a new one is drawn so that its lane is the lane of this
    moment's newcomers (``newcomers_lane``): a web process's batch of new fans then commits
    under one lane's chain head, rather than one or two fans per lane (docs/scaling.md). The
    cookie is the on-sale's own so that a browser's first join of it is new there whatever
    on-sales it joined before; a returning browser's lane would be its hash's, away from the
    batch's. The lane is still the keyed hash of the identity (rules/lanes.py), and the room,
    not the fan, picks among new identities."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Identity(digest=_digest("user", str(user.pk)), new_cookie_token=None)
    laned = lanes > 1 and event_id is not None
    cookie = identity_cookie_name(event_id if laned else None)
    token = request.get_signed_cookie(cookie, default=None, salt=_COOKIE_SALT)
    if token:
        return Identity(digest=_digest("cookie", token), new_cookie_token=None)
    key = request.headers.get("Idempotency-Key")
    if key is not None:
        if not _IDEMPOTENCY_KEY_RE.match(key):
            raise ApiError(
                400, "bad_request", "Idempotency-Key must be 1-255 printable ASCII characters."
            )
        return Identity(digest=_digest("idempotency", key), new_cookie_token=None)
    if not laned:
        token = secrets.token_urlsafe(24)
        return Identity(digest=_digest("cookie", token), new_cookie_token=token)
    stem = secrets.token_urlsafe(24)  # as unguessable as a lone token; the suffix only sorts
    tokens: dict[str, str] = {}

    def candidates() -> Iterator[str]:
        for n in range(64 * lanes):  # about `lanes` tried on average
            token = f"{stem}.{n:x}"
            tokens[digest := _digest("cookie", token)] = token
            yield digest

    try:
        digest = first_in_lane(candidates(), lanes=lanes, lane=newcomers_lane(lanes))
    except ValueError:  # all 64 x lanes missed (about e^-64, never seen): the first one
        digest = next(iter(tokens))
    return Identity(digest=digest, new_cookie_token=tokens[digest], cookie_name=cookie)


# The newcomers' lane turns with every call, from a place of its own in each process: a
# batch's new fans share one lane, and the processes' batches spread over every lane.
_newcomers_turn = itertools.count(secrets.randbelow(1 << 30))
_newcomers_batch = threading.local()


def newcomers_lane(lanes: int) -> int:
    """The lane new identities are drawn in: the batch's (``newcomers_batch``), else the next."""
    held = getattr(_newcomers_batch, "turn", None)
    return (held if held is not None else next(_newcomers_turn)) % lanes


@contextmanager
def newcomers_batch() -> Iterator[None]:
    """Within it, every new identity this thread draws is in one lane."""
    _newcomers_batch.turn = next(_newcomers_turn)
    try:
        yield
    finally:
        _newcomers_batch.turn = None


def identity_remember(response: HttpResponse, identity: Identity) -> None:
    if identity.new_cookie_token is None:
        return
    response.set_signed_cookie(
        identity.cookie_name or settings.WR_IDENTITY_COOKIE,
        identity.new_cookie_token,
        salt=_COOKIE_SALT,
        max_age=settings.WR_IDENTITY_COOKIE_MAX_AGE,
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )


# ---------------------------------------------------------- the client's address


class _Sometimes:
    """Says when to log again: a proxy that writes something else than an address writes it
    on every join, and one line a minute tells the operator as much as a line a join."""

    def __init__(self, every_seconds: float) -> None:
        self.every_seconds = every_seconds
        self.lock = threading.Lock()
        self.last: float | None = None
        self.count = 0

    def due(self) -> int | None:
        """How many times it happened since the last line, if one is due now; else None."""
        now = time.monotonic()
        with self.lock:
            self.count += 1
            if self.last is not None and now - self.last < self.every_seconds:
                return None
            count, self.count, self.last = self.count, 0, now
            return count


_not_an_address_warnings = _Sometimes(every_seconds=60.0)


def client_ip(request: HttpRequest) -> str:
    return client_ip_from(
        request.META.get("REMOTE_ADDR", ""), request.headers.get("X-Forwarded-For")
    )


def scope_client_ip(scope: Mapping[str, Any]) -> str:
    """``client_ip`` for an ASGI scope (a WebSocket's), by the same trusted-proxy rule."""
    client = scope.get("client")
    remote = str(client[0]) if client else ""
    # Repeated headers count as one comma-separated list, as Django joins them.
    values = [
        value.decode("latin-1")
        for name, value in scope.get("headers", ())
        if name.lower() == b"x-forwarded-for"
    ]
    return client_ip_from(remote, ",".join(values) if values else None)


def client_ip_from(remote: str, forwarded_for: str | None) -> str:
    remote = remote or "unknown"
    hops = settings.WR_TRUSTED_PROXY_COUNT
    if not hops:
        return remote
    if forwarded_for is None:
        return remote
    # Empty elements are kept: dropping them would shift a value the client wrote into the
    # position our proxies vouch for.
    forwarded = [part.strip() for part in forwarded_for.split(",")]
    # The last `hops` entries were added by our own proxies; the one before them is the
    # address our outermost proxy saw. Anything further left is the client's to invent.
    if len(forwarded) < hops:
        return remote
    candidate = forwarded[-hops]
    try:
        # A bare address only: no port, no brackets, no zone (a proxy of ours writes none).
        address = ipaddress.ip_address(candidate)
        if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
            raise ValueError(candidate)
    except ValueError:
        _warn_not_an_address(candidate, remote)
        return remote
    return str(address)


def _warn_not_an_address(candidate: str, remote: str) -> None:
    """The trusted position of X-Forwarded-For holds no address: the join limit falls back to
    the peer's address (all clients of that proxy share it), which the operator must hear of:
    WR_TRUSTED_PROXY_COUNT or the proxy's configuration is wrong."""
    seen = _not_an_address_warnings.due()
    if seen is None:
        return
    logger.warning(
        "X-Forwarded-For holds %r where a trusted proxy (WR_TRUSTED_PROXY_COUNT=%d) writes the "
        "client's address; limiting joins by the peer address %s instead (%d such since the "
        "last warning); check the proxies' configuration",
        candidate[:64],
        settings.WR_TRUSTED_PROXY_COUNT,
        remote,
        seen,
    )


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


_ADDRESS_DIGEST_SALT = "waitingroom.address"


def address_digest(request: HttpRequest) -> str:
    """What is kept of the client address (an IPv6 /64 counting as one): a keyed digest
    (HMAC under SECRET_KEY), never the address itself. Keyed, because a plain hash of an IPv4
    address is undone by trying all 2^32 of them. Under the current key only, not also under
    SECRET_KEY_FALLBACKS: a digest is a lookup key, and trying each key would cost the address
    cap a query per key on every join; what a rotation loosens instead is bounded and
    documented (docs/configuration.md, "Rotating the secret key")."""
    return salted_hmac(
        _ADDRESS_DIGEST_SALT, rate_key_for_ip(client_ip(request)), algorithm="sha256"
    ).hexdigest()


# ---------------------------------------------------------------------- device

# Phones and tablets as their browsers name themselves: "Mobi" (every phone browser's token,
# Mozilla's advice), Android (its tablets drop "Mobi"), and Apple's and the e-readers' own.
_HANDHELD_UA_RE = re.compile(r"Mobi|Android|iPhone|iPad|iPod|Silk|Kindle|Opera Mini", re.I)


def handheld_request(request: HttpRequest) -> bool:
    """Whether the browser says it is a phone or a tablet: the ``Sec-CH-UA-Mobile`` hint
    (Chromium's, sent with every request of a secure origin) or the User-Agent.
    A tablet that calls itself a desktop (iPadOS Safari) is caught by the page's stylesheet
    (``pointer: coarse``, queueing/static/queueing/waiting.css)."""
    if request.headers.get("Sec-CH-UA-Mobile") == "?1":
        return True
    return bool(_HANDHELD_UA_RE.search(request.headers.get("User-Agent", "")))
