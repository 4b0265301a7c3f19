"""Passes: JWTs (EdDSA / Ed25519) that prove admission, verifiable offline with the JWKS.

A rotated key is published before it signs, and a superseded key stays published for the
longest possible pass lifetime, so every pass can be verified offline from issue to expiry.
Passes are deterministic for an admission (same claims, Ed25519 signatures are deterministic),
so handing one out again on every poll needs no storage.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from jwt.algorithms import OKPAlgorithm
from jwt.utils import base64url_decode, base64url_encode

from queueing.models import PassKey
from queueing.passes.sealing import private_key_open, private_key_reseal, private_key_seal

ALGORITHM = "EdDSA"
# Passes live at most this long (Event.session_seconds is capped at one day).
MAX_PASS_SECONDS = 86_400
CLOCK_LEEWAY_SECONDS = 5
# A rotated key is in the JWKS this long before it signs (shops cache the JWKS for 5 minutes).
KEY_PREPUBLISH = timedelta(minutes=10)


class PassInvalid(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class PassClaims:
    event_slug: str
    ticket_id: uuid.UUID
    expires_at: datetime
    tier: str
    pass_id: str = ""  # ``jti``: one per admission (``pass_id_for``)


def _new_key(*, now: datetime, activates_at: datetime) -> PassKey:
    private = Ed25519PrivateKey.generate()
    kid = uuid.uuid4().hex[:16]
    jwk = OKPAlgorithm.to_jwk(private.public_key(), as_dict=True)
    jwk.update({"kid": kid, "use": "sig", "alg": ALGORITHM})
    return PassKey.objects.create(
        kid=kid,
        private_key_sealed=private_key_seal(private),
        public_jwk=jwk,
        created_at=now,
        activates_at=activates_at,
    )


def signing_key(*, now: datetime) -> PassKey:
    key = PassKey.objects.filter(activates_at__lte=now).order_by("-activates_at", "-id").first()
    if key is not None:
        return key
    # The very first key. Two processes may both create one at the same moment: harmless,
    # both are published and the newer signs.
    return _new_key(now=now, activates_at=now)


def pass_key_rotate(*, now: datetime, activate_in: timedelta = KEY_PREPUBLISH) -> PassKey:
    """A new key, published at once and signing from ``now + activate_in``."""
    return _new_key(now=now, activates_at=now + activate_in)


def pass_keys_reseal() -> int:
    """Seal every stored key again under the first encryption key (after a new one was put
    first): the old encryption key may then be dropped. How many keys changed."""
    resealed = 0
    for key in PassKey.objects.order_by("id"):
        sealed = private_key_reseal(key.private_key_sealed)
        # Compare-and-set: a key resealed meanwhile by another run is left as that run left it.
        resealed += PassKey.objects.filter(
            pk=key.pk, private_key_sealed=key.private_key_sealed
        ).update(private_key_sealed=sealed)
    return resealed


def published_keys(*, now: datetime) -> list[PassKey]:
    """Upcoming keys, the signing key, and keys superseded less than a pass lifetime ago."""
    signing_key(now=now)
    keys = list(PassKey.objects.order_by("activates_at", "id"))
    published = []
    for index, key in enumerate(keys):
        successor = next((k for k in keys[index + 1 :] if k.activates_at <= now), None)
        superseded_at = successor.activates_at if successor is not None else None
        if superseded_at is None or superseded_at > now - timedelta(seconds=MAX_PASS_SECONDS):
            published.append(key)
    return published


def jwks(*, now: datetime) -> dict[str, Any]:
    return {"keys": [key.public_jwk for key in published_keys(now=now)]}


def pass_id_for(ticket_id: uuid.UUID, admitted_at: datetime) -> str:
    """The ``jti`` of the passes of one admission: the same for every hand-over of it, another
    for the next admission of the same ticket (after a re-entry)."""
    return hashlib.sha256(f"{ticket_id}:{admitted_at.isoformat()}".encode()).hexdigest()[:32]


def pass_issue(
    *,
    event_slug: str,
    ticket_id: uuid.UUID,
    tier: str,
    admitted_at: datetime,
    expires_at: datetime,
    now: datetime,
    key: PassKey | None = None,
) -> str:
    """``key``: the signing key, when the caller signs many passes at once (read once)."""
    key = key or signing_key(now=now)
    issued = int(admitted_at.timestamp())
    claims = {
        "iss": settings.WR_PUBLIC_URL,
        "aud": event_slug,
        "sub": str(ticket_id),
        "jti": pass_id_for(ticket_id, admitted_at),
        "iat": issued,
        "nbf": issued,
        "exp": int(expires_at.timestamp()),
        "tier": tier,
    }
    private = private_key_open(key.private_key_sealed)
    return jwt.encode(claims, private, algorithm=ALGORITHM, headers={"kid": key.kid})


def _canonical_segments(token: str) -> bool:
    """Each of the three segments must be the one base64url spelling of its bytes: the spare
    bits of a last character may not vary, so a pass has exactly one valid form."""
    segments = token.split(".")
    if len(segments) != 3:
        return False
    try:
        return all(base64url_encode(base64url_decode(s)).decode() == s for s in segments)
    except (ValueError, TypeError):
        return False


def pass_decode(
    token: str,
    *,
    now: datetime,
    verify_exp: bool = True,
    keys: Sequence[PassKey] | None = None,
) -> PassClaims:
    """Check signature, issuer and expiry; raise PassInvalid with the API's reason.

    ``keys``: the published keys, when the caller holds them already (the gate keeps them
    in-process: queueing/passes/cached.py); read from PostgreSQL otherwise."""
    if not isinstance(token, str) or not token or len(token) > 4096 or not token.isascii():
        raise PassInvalid("malformed")
    if not _canonical_segments(token):
        raise PassInvalid("malformed")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise PassInvalid("malformed") from exc
    kid = header.get("kid")
    published = published_keys(now=now) if keys is None else keys
    key = next((k for k in published if k.kid == kid), None)
    if key is None or header.get("alg") != ALGORITHM:
        raise PassInvalid("bad_signature")
    public = OKPAlgorithm.from_jwk(key.public_jwk)
    try:
        claims = jwt.decode(
            token,
            public,
            algorithms=[ALGORITHM],
            issuer=settings.WR_PUBLIC_URL,
            options={
                "verify_aud": False,  # any event's pass; the caller checks which
                # Time claims are checked below against ``now``, not the wall clock.
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "require": ["aud", "sub", "exp", "iat", "nbf", "iss"],
            },
        )
    except jwt.InvalidSignatureError as exc:
        raise PassInvalid("bad_signature") from exc
    except jwt.PyJWTError as exc:
        raise PassInvalid("malformed") from exc
    try:
        expires, not_before = int(claims["exp"]), int(claims["nbf"])
    except (ValueError, TypeError) as exc:
        raise PassInvalid("malformed") from exc
    moment = now.timestamp()
    if not_before > moment + CLOCK_LEEWAY_SECONDS:
        raise PassInvalid("malformed")
    if verify_exp and expires <= moment - CLOCK_LEEWAY_SECONDS:
        raise PassInvalid("expired")
    try:
        return PassClaims(
            event_slug=str(claims["aud"]),
            ticket_id=uuid.UUID(str(claims["sub"])),
            expires_at=datetime.fromtimestamp(int(claims["exp"]), tz=now.tzinfo),
            tier=str(claims.get("tier", "")),
            pass_id=str(claims.get("jti", "")),
        )
    except (ValueError, TypeError) as exc:
        raise PassInvalid("malformed") from exc
