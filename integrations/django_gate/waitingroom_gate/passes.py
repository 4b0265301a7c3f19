"""Offline verification of a pass: signature with the room's published key, then the claims."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

ALGORITHM = "EdDSA"
# Passes are a few hundred bytes; a cookie cannot hold much more than 4 kB anyway.
MAX_PASS_LENGTH = 4096
REQUIRED_CLAIMS = ("iss", "aud", "sub", "iat", "nbf", "exp")

KeyLookup = Callable[[str], Ed25519PublicKey | None]


class PassRejected(Exception):
    """The pass does not let its holder in; ``reason`` is short and stable, for logs."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class WaitingRoomPass:
    """A verified pass, as the shop sees it on ``request.waiting_room_pass``."""

    token: str  # the pass itself, e.g. for the room's POST /api/v1/passes/complete
    event: str
    ticket_id: str
    tier: str
    jti: str
    issued_at: datetime
    expires_at: datetime
    claims: dict[str, Any] = field(repr=False)


def _whole_seconds(claims: dict[str, Any], name: str) -> int:
    value = claims[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PassRejected("malformed")
    return int(value)


def pass_verify(
    token: str,
    *,
    keys: KeyLookup,
    issuer: str,
    event: str,
    now: float,
    leeway: int = 5,
) -> WaitingRoomPass:
    """The pass's claims if the room signed it for ``event``, and it is within its time
    window at ``now`` (a Unix time), give or take ``leeway`` seconds; else PassRejected."""
    if not token or len(token) > MAX_PASS_LENGTH or not token.isascii():
        raise PassRejected("malformed")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as error:
        raise PassRejected("malformed") from error
    if header.get("alg") != ALGORITHM:
        # "none", HS256 with the public key as secret, ...: only the room's algorithm counts.
        raise PassRejected("bad_signature")
    kid = header.get("kid")
    # Only the room's JWKS names keys: jku/jwk/x5u/x5c headers are never looked at.
    key = keys(kid) if isinstance(kid, str) and kid else None
    if key is None:
        raise PassRejected("unknown_key")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            audience=event,
            issuer=issuer,
            options={
                # Checked below against `now`, not the wall clock PyJWT would read.
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "require": list(REQUIRED_CLAIMS),
            },
        )
    except jwt.InvalidSignatureError as error:
        raise PassRejected("bad_signature") from error
    except jwt.InvalidAudienceError as error:
        raise PassRejected("wrong_event") from error
    except jwt.InvalidIssuerError as error:
        raise PassRejected("wrong_issuer") from error
    except jwt.PyJWTError as error:
        raise PassRejected("malformed") from error
    expires = _whole_seconds(claims, "exp")
    not_before = _whole_seconds(claims, "nbf")
    issued = _whole_seconds(claims, "iat")
    if not_before > now + leeway:
        raise PassRejected("not_yet_valid")
    if expires <= now - leeway:
        raise PassRejected("expired")
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject:
        raise PassRejected("malformed")
    return WaitingRoomPass(
        token=token,
        event=event,
        ticket_id=subject,
        tier=str(claims.get("tier", "")),
        jti=str(claims.get("jti", "")),
        issued_at=datetime.fromtimestamp(issued, tz=UTC),
        expires_at=datetime.fromtimestamp(expires, tz=UTC),
        claims=claims,
    )
