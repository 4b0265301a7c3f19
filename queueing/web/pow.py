"""Optional proof of work on join: a signed, short-lived, single-use challenge, and a nonce
such that ``sha256(challenge + ":" + nonce)`` starts with ``difficulty`` zero bits.

It costs a fan's browser about a second at 16 bits and a bot farm the same per join; the
server checks it with one hash. Challenges are signed (nothing stored until spent) and spent
once (a Redis key that expires with the challenge).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing

from events.models import Event
from queueing.hot import keys, rate_limits
from queueing.rules.errors import ProofOfWorkInvalid, ProofOfWorkRequired

_SALT = "waitingroom.pow.v1"


@dataclass(frozen=True)
class Challenge:
    challenge: str
    difficulty: int
    expires_in: int


def pow_challenge(event: Event) -> Challenge:
    token = signing.TimestampSigner(salt=_SALT).sign(f"{event.pk}.{secrets.token_hex(12)}")
    return Challenge(
        challenge=token,
        difficulty=event.pow_difficulty,
        expires_in=settings.WR_POW_CHALLENGE_SECONDS,
    )


def leading_zero_bits(digest: bytes) -> int:
    bits = 0
    for byte in digest:
        if byte == 0:
            bits += 8
            continue
        return bits + (8 - byte.bit_length())
    return bits


def solves(challenge: str, nonce: str, difficulty: int) -> bool:
    digest = hashlib.sha256(f"{challenge}:{nonce}".encode()).digest()
    return leading_zero_bits(digest) >= difficulty


def _invalid(detail: str) -> ProofOfWorkInvalid:
    return ProofOfWorkInvalid(detail)


def pow_check(*, event: Event, proof: Any) -> None:
    """Raise unless ``proof`` (``{"challenge", "nonce"}``) is a fresh, unspent solution."""
    if not event.pow_difficulty:
        return
    if proof is None:
        raise ProofOfWorkRequired(
            "This on-sale asks for a proof of work: GET .../challenge, solve it, send 'pow'."
        )
    if not isinstance(proof, dict):
        raise _invalid("pow must be an object with challenge and nonce.")
    challenge, nonce = proof.get("challenge"), proof.get("nonce")
    if not isinstance(challenge, str) or not isinstance(nonce, str):
        raise _invalid("pow needs a challenge and a nonce (strings).")
    if not nonce.isascii() or not nonce.isprintable() or not 0 < len(nonce) <= 64:
        raise _invalid("The nonce must be 1-64 printable ASCII characters.")
    if not challenge.isascii() or len(challenge) > 200:
        raise _invalid("That challenge is not one of ours.")
    try:
        payload = signing.TimestampSigner(salt=_SALT).unsign(
            challenge, max_age=settings.WR_POW_CHALLENGE_SECONDS
        )
    except signing.SignatureExpired as exc:
        raise _invalid("That challenge expired; ask for a new one.") from exc
    except signing.BadSignature as exc:
        raise _invalid("That challenge is not one of ours.") from exc
    event_id, _, challenge_id = payload.partition(".")
    if event_id != str(event.pk):
        raise _invalid("That challenge is for another on-sale.")
    if not solves(challenge, nonce, event.pow_difficulty):
        raise _invalid("The nonce does not solve the challenge.")
    fresh = rate_limits.spend_once(
        keys.pow_used(challenge_id), ttl_seconds=settings.WR_POW_CHALLENGE_SECONDS
    )
    if not fresh:
        raise _invalid("That challenge was already used; ask for a new one.")
