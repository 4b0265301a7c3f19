"""One-time links that move a fan's place to another browser: their tokens and refusals. Pure.

A link's token is shown once (in the QR code, the e-mail); only its SHA-256 is kept, so the
table cannot be read back into working links."""

from __future__ import annotations

import enum
import hashlib
import secrets

from queueing.rules.errors import PlaceMoved
from queueing.rules.ticket_codec import TicketRef


class LinkRefusal(enum.StrEnum):
    UNKNOWN = "unknown"  # no such link for this on-sale (or a guess)
    USED = "used"  # it moved the place once already
    EXPIRED = "expired"  # its time is over
    ENDED = "ended"  # the place it points to is no longer in line or in the shop


class PlaceLinkRefused(Exception):
    def __init__(self, reason: LinkRefusal) -> None:
        super().__init__(reason.value)
        self.reason = reason


def link_token_new() -> str:
    return secrets.token_urlsafe(24)


def link_token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def holder_key_new() -> str:
    return secrets.token_hex(16)


def ticket_holder_check(ref: TicketRef, holder_key: str) -> None:
    """PlaceMoved unless the ticket names the place's holder key (both "" for a place never
    moved): the ticket a place had before it moved is spent."""
    if ref.holder != holder_key:
        raise PlaceMoved()
