"""Webhooks' rules, pure: which moments there are, how a body is signed, when a failed
delivery is tried again, and which destinations the room refuses to call (docs/api.md,
"Webhooks")."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

# Every moment an endpoint may hear of, and what it means.
WEBHOOK_TYPES: dict[str, str] = {
    "onsale.created": "staff created the on-sale",
    "onsale.started": "the line started (the schedule's start, or the creation)",
    "onsale.paused": "staff paused admission",
    "onsale.resumed": "staff resumed admission",
    "onsale.closed": "staff closed the on-sale, or its end passed",
    "onsale.sold_out": "the shop or staff said it sold out (which closes it)",
    "onsale.mode_changed": "staff changed the mode",
    "onsale.safety_net_queueing": "in safety net, fans began to queue (the shop is full)",
    "onsale.line_emptied": "the last fan in line left or was let in, while open",
    "onsale.chain_verification_failed": "a check of the audit trail found it broken",
}

SIGNATURE_VERSION = "v1"


def webhook_signature(secret: str, *, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secrets: Sequence[str], *, timestamp: int, body: bytes) -> str:
    """``v1=<hex>``, one per secret that signs (two, for a while after a rotation), joined by
    ", "; a receiver accepts the delivery if any one matches its secret."""
    return ", ".join(
        f"{SIGNATURE_VERSION}={webhook_signature(secret, timestamp=timestamp, body=body)}"
        for secret in secrets
    )


def retry_delay(attempt: int, *, first_seconds: float) -> float:
    """Seconds to wait after the ``attempt``-th failed attempt (1-based): ``first_seconds``,
    doubling each time. Ten attempts with the default 180 s spread over about a day."""
    return first_seconds * 2 ** (attempt - 1)


def delivered(status_code: int) -> bool:
    return 200 <= status_code < 300


def types_refusal(types: Iterable[object]) -> str | None:
    """Why a list of webhook types is refused, or None."""
    chosen = list(types)
    if not chosen:
        return "Choose at least one type."
    unknown = [t for t in chosen if t not in WEBHOOK_TYPES]
    if unknown:
        return f"Unknown type {unknown[0]!r}: one of {', '.join(WEBHOOK_TYPES)}."
    return None


def url_refusal(url: str, *, plain_http: bool) -> str | None:
    """Why an endpoint's URL is refused before any address is looked up: not https (unless
    ``plain_http``), no host, credentials in it, or a fragment."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return "Not a URL."
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "An https:// URL with a host."
    if parts.scheme == "http" and not plain_http:
        return "Webhooks go over https:// only (WR_WEBHOOK_ALLOW_HTTP lets http:// through)."
    if parts.username or parts.password:
        return "No user name or password in the URL: the signature authenticates the room."
    if parts.fragment:
        return "No #fragment: it is never sent."
    return None


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def address_refusal(address: str, *, allowed: Sequence[Network]) -> str | None:
    """Why the room will not call ``address`` (a resolved IP): anything but a public address
    (loopback, private, link-local such as cloud metadata, shared, multicast, reserved), unless
    it is in one of the ``allowed`` networks."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip in network for network in allowed):
        return None
    if not ip.is_global or ip.is_multicast:
        return f"{ip} is not a public address (WR_WEBHOOK_ALLOWED_NETWORKS can allow it)."
    return None
