"""The Queue-it wire format the room speaks to a shop's unmodified Queue-it connector
(docs/queueit.md): the ``queueittoken`` an admitted fan takes back to the shop, and the
pieces of the connector's cancel URLs. Pure: no I/O, no clock of its own.

The token is ``e_<event id>~q_<queue id>~ts_<expiry>~ce_true~rt_<type>~h_<hash>``, where the
hash is the lower-case hex HMAC-SHA256 of everything before ``~h_`` under the on-sale's
Queue-it secret key. The connector compares the hash as a string (upper-case hex is refused),
compares the event id exactly, refuses a ``ts_`` in the past, and throws on a token without
``rt_``: so every field is always there, and ``h_`` comes last. A value may contain neither
``_`` nor ``~`` (the connector drops such a field), which the on-sale's event id rules out
(``events.models``: lower-case letters, digits and hyphens) and a UUID never has.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# The query parameter the connector reads the token from.
TOKEN_PARAMETER = "queueittoken"
# How long the hand-over stays valid: the connector checks only that it is not past (the
# room's and the shop's clocks must agree within this; keep both NTP-synced).
TOKEN_VALID_SECONDS = 180


class RedirectType(StrEnum):
    """``rt_``: why the fan was let through. The connector stores it in its cookie."""

    QUEUE = "queue"  # the fan waited in line
    SAFETY_NET = "safetynet"  # let straight through (safety net, passthrough, free room)


@dataclass(frozen=True, slots=True)
class QueueitToken:
    event_id: str
    queue_id: uuid.UUID
    expires_at: int  # unix seconds
    redirect_type: RedirectType


def token_hash(secret_key: str, text: str) -> str:
    """What Queue-it's connectors compute: HMAC-SHA256 over ``text``, lower-case hex."""
    return hmac.new(secret_key.encode(), text.encode(), hashlib.sha256).hexdigest()


def token_mint(
    *, event_id: str, queue_id: uuid.UUID, now: float, redirect_type: RedirectType, secret_key: str
) -> str:
    if not event_id or "_" in event_id or "~" in event_id:
        raise ValueError("A Queue-it event id may contain neither '_' nor '~'.")
    expires = int(now) + TOKEN_VALID_SECONDS
    body = f"e_{event_id}~q_{queue_id}~ts_{expires}~ce_true~rt_{redirect_type.value}"
    return f"{body}~h_{token_hash(secret_key, body)}"


def token_read(token: str, *, secret_key: str) -> QueueitToken | None:
    """A token this room minted with ``secret_key`` (expired or not), else None. The room
    itself only reads tokens in its tests and for the error pages' logs."""
    body, separator, given = token.rpartition("~h_")
    if not separator or not hmac.compare_digest(token_hash(secret_key, body), given):
        return None
    fields = dict(part.split("_", 1) for part in body.split("~") if part.count("_") == 1)
    try:
        return QueueitToken(
            event_id=fields["e"],
            queue_id=uuid.UUID(fields["q"]),
            expires_at=int(fields["ts"]),
            redirect_type=RedirectType(fields["rt"]),
        )
    except (KeyError, ValueError):
        return None


def with_token(url: str, token: str) -> str:
    """``url`` with ``queueittoken=<token>`` as its last query parameter (an earlier one is
    replaced), before any fragment. The token is left unescaped: its characters are all
    URL-safe, and the connector reads it raw."""
    parts = urlsplit(url)
    kept = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != TOKEN_PARAMETER
    ]
    query = urlencode(kept)
    query = f"{query}&{TOKEN_PARAMETER}={token}" if query else f"{TOKEN_PARAMETER}={token}"
    return urlunsplit(parts._replace(query=query))


# Pairs read from one cancel URL at most: a shop cancels the handful of waiting rooms a page
# is behind, and a crafted URL must not cost more.
CANCEL_PAIRS_MAX = 10


@dataclass(frozen=True, slots=True)
class CancelPair:
    event_id: str
    queue_id: uuid.UUID | None  # None: the ticket this browser holds for the on-sale


def cancel_pairs(wrl: str) -> list[CancelPair]:
    """The v4/v5 connector's ``wrl=<e1>[~<q1>][_<e2>[~<q2>]…]``; a queue id that is not a
    UUID (no ticket of this room) drops its pair."""
    pairs: list[CancelPair] = []
    for item in wrl.split("_")[:CANCEL_PAIRS_MAX]:
        event_id, _, queue_id = item.partition("~")
        if not event_id:
            continue
        pair = cancel_pair(event_id, queue_id)
        if pair is not None:
            pairs.append(pair)
    return pairs


def cancel_pair(event_id: str, queue_id: str) -> CancelPair | None:
    if not queue_id:
        return CancelPair(event_id=event_id, queue_id=None)
    try:
        return CancelPair(event_id=event_id, queue_id=uuid.UUID(queue_id))
    except ValueError:
        return None
