"""The defences at the door: join rate limits per client IP and per identity, the
wrong-access-code budget per client IP and on-sale, kept atomically in Redis (the client's
address: callers.py), and the optional proof of work.

Unlike a read-then-write throttle, a burst of parallel joins cannot slip past the limit: each
call is counted and judged in one script. The identity limit only slows down one client
hammering join (a client chooses its identity); the IP limit is the one that binds bots.

If Redis is down, joins are not refused for it.

The proof of work: a signed, short-lived, single-use challenge, and a
nonce such that ``sha256(challenge + ":" + nonce)`` starts with ``difficulty`` zero bits.

It costs a fan's browser about a second at 16 bits and a bot farm the same per join; the
server checks it with one hash. Challenges are signed (nothing stored until spent) and spent
once (a Redis key that expires with the challenge).
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.http import HttpRequest

from events.models import Event
from queueing.hot import keys, rate_limits
from queueing.line.joining import JoinRequest, arrival_refusal, tiers_for_access_codes
from queueing.rules.errors import (
    ProofOfWorkInvalid,
    ProofOfWorkRequired,
    QueueError,
    RateLimited,
)
from queueing.web.callers import client_ip, rate_key_for_ip

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0


def _refuse(retry_after: float, detail: str = "Too many attempts to join.") -> RateLimited:
    return RateLimited(
        f"{detail} Please wait a moment.", retry_after=max(1, math.ceil(retry_after))
    )


def join_rate_check(*, request: HttpRequest, identity: str) -> None:
    now = time.time()
    budgets = (
        ("ip", rate_key_for_ip(client_ip(request)), settings.WR_JOIN_LIMIT_PER_IP),
        ("id", identity, settings.WR_JOIN_LIMIT_PER_IDENTITY),
    )
    for scope, caller, limit in budgets:
        if not limit:
            continue
        wait = rate_limits.rate_limit_hit(
            keys.join_rate(scope, caller), now=now, window=WINDOW_SECONDS, limit=limit
        )
        if wait is not None:
            raise _refuse(wait)


def _has_code(join: JoinRequest) -> bool:
    return bool(join.access_code and join.access_code.strip())


def wrong_code_gate(joins: Sequence[JoinRequest]) -> list[RateLimited | None]:
    """Each join's refusal by the wrong-code budget (None: it may go on), judged one after
    the other in the order given.

    An address may try ``WR_WRONG_CODES_PER_ADDRESS`` wrong access codes per on-sale in any
    ``WR_WRONG_CODES_WINDOW_SECONDS``. A wrong code is spent from the budget before the join
    is tried, atomically, so a parallel storm of guesses cannot slip past it; a join with a
    right code spends nothing but is refused too while the budget is spent, or a guesser
    would learn the right code from the refusal being different. Joins without a code, and
    joins the on-sale refuses anyway (not open, closed, in maintenance), are not judged: they
    reveal nothing of the codes. Off while Redis is unreachable, like the join limits."""
    refusals: list[RateLimited | None] = [None] * len(joins)
    limit = settings.WR_WRONG_CODES_PER_ADDRESS
    judged: dict[int, list[int]] = {}  # event id -> indexes of joins to judge
    for index, join in enumerate(joins):
        if (
            limit
            and join.address is not None
            and _has_code(join)
            and arrival_refusal(join.event.state_at(join.now), join.event.mode) is None
        ):
            judged.setdefault(join.event.id, []).append(index)
    window = float(settings.WR_WRONG_CODES_WINDOW_SECONDS)
    for indexes in judged.values():
        event = joins[indexes[0]].event
        tiers = tiers_for_access_codes(event, [joins[i].access_code for i in indexes])
        for index in indexes:
            join = joins[index]
            assert join.address is not None
            wrong = isinstance(tiers[join.access_code], QueueError)
            judge = rate_limits.rate_limit_hit if wrong else rate_limits.rate_limit_peek
            wait = judge(
                keys.wrong_codes(event.id, join.address),
                now=time.time(),
                window=window,
                limit=limit,
            )
            if wait is not None:
                refusals[index] = _refuse(wait, "Too many wrong access codes from your network.")
    return refusals


# ------------------------------------------------------------------ proof of work

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
