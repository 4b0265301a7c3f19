"""A draw's registrations, pure (docs/api.md, "Registration and the draw"): who a fan is, the
hash that stands for them in public, and the link that confirms an address.

An identity is ``email:<address lower-cased>`` or ``shop:<sub>``. It is stored as
``HMAC-SHA256(identity_key, identity)``, the key being the window's own secret: unique per
on-sale without the address, and nobody without the key can test an address against it. A
registration's published hash is ``sha256("registration:<id>:<tier>:<identity hash>")``,
which names the registration and its tier and reveals nothing of the fan.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from dataclasses import dataclass
from datetime import datetime

import jwt

EMAIL_MAX_LENGTH = 254
SHOP_SUB_MAX_LENGTH = 200
# A shop's identity link is short-lived: a token valid longer than this is refused, so a
# leaked one cannot register its account long after it was handed out.
SHOP_TOKEN_MAX_SECONDS = 3600


class ShopTokenInvalid(Exception):
    """The shop's token is unsigned, expired, for another on-sale or malformed."""


def email_identity(address: str) -> str:
    return f"email:{address.strip().lower()}"


def shop_identity(sub: str) -> str:
    return f"shop:{sub}"


def identity_hash(identity_key: str, identity: str) -> str:
    return hmac.new(identity_key.encode(), identity.encode(), hashlib.sha256).hexdigest()


def registration_hash(registration_id: uuid.UUID | str, tier: str, identity_digest: str) -> str:
    return hashlib.sha256(
        f"registration:{registration_id}:{tier}:{identity_digest}".encode()
    ).hexdigest()


def confirm_token(identity_key: str, registration_id: uuid.UUID | str) -> str:
    """The secret of an address's confirmation link: derived, not stored, so the mail can be
    sent (again) by a worker that never saw it."""
    mac = hmac.new(identity_key.encode(), f"confirm:{registration_id}".encode(), hashlib.sha256)
    return f"{registration_id}.{mac.hexdigest()}"


def confirm_token_id(token: str) -> uuid.UUID | None:
    """The registration a confirmation token names (to look its key up), None if malformed."""
    head, _, _ = token.partition(".")
    try:
        return uuid.UUID(head)
    except ValueError:
        return None


def confirm_token_valid(identity_key: str, token: str) -> bool:
    registration_id = confirm_token_id(token)
    if registration_id is None:
        return False
    return hmac.compare_digest(confirm_token(identity_key, registration_id), token)


@dataclass(frozen=True)
class ShopClaims:
    sub: str


def shop_token_verify(token: str, *, key: str, slug: str, now: datetime) -> ShopClaims:
    """The shop account a token names: HS256 under the on-sale's shop key, ``aud`` the slug,
    ``exp`` required and at most ``SHOP_TOKEN_MAX_SECONDS`` after ``iat`` (or now)."""
    if not key:
        raise ShopTokenInvalid("This on-sale takes no shop identities.")
    try:
        claims = jwt.decode(
            token,
            key,
            algorithms=["HS256"],
            audience=slug,
            # PyJWT would read its own clock: the expiry is checked below against ``now``.
            options={"require": ["exp", "sub", "aud"], "verify_exp": False, "verify_iat": False},
        )
    except jwt.PyJWTError as exc:
        raise ShopTokenInvalid(f"The shop's token is not valid: {exc}.") from None
    exp = claims["exp"]
    if not isinstance(exp, int | float) or exp <= now.timestamp():
        raise ShopTokenInvalid("The shop's token has expired.")
    start = claims.get("iat", now.timestamp())
    if not isinstance(start, int | float) or exp - start > SHOP_TOKEN_MAX_SECONDS:
        raise ShopTokenInvalid("The shop's token is valid for too long (an hour at most).")
    sub = claims["sub"]
    if not isinstance(sub, str) or not sub or len(sub) > SHOP_SUB_MAX_LENGTH:
        raise ShopTokenInvalid("The shop's token names no account.")
    return ShopClaims(sub=sub)


def invitation_code(identity_key: str, invitation_id: uuid.UUID | str) -> str:
    """An invitation's single-use code: derived, so that only its hash is stored and the mail
    (or the shop's fan asking again) can be given it by whoever holds the window's key."""
    mac = hmac.new(identity_key.encode(), f"invite:{invitation_id}".encode(), hashlib.sha256)
    return mac.hexdigest()[:32]


def invitation_code_hash(code: str) -> str:
    return hashlib.sha256(f"invitation:{code.strip().lower()}".encode()).hexdigest()
