"""Tickets: the fan's signed, URL-safe handle on a queue entry.

A ticket names the entry, its event and its tier, so that the status path can find the entry
in the hot index after checking only the signature: no database or Redis call to verify.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core import signing

from queueing.rules.errors import ErrorCode, QueueError

_SALT = "waitingroom.ticket.v1"
_PAYLOAD_RE = re.compile(r"^([1-9][0-9]{0,18})-([1-9][0-9]{0,18})-([1-9][0-9]{0,18})$")
MAX_TICKET_LENGTH = 200


class InvalidTicket(QueueError, code=ErrorCode.INVALID_TICKET, detail="This ticket is not valid."):
    """Malformed, or the signature does not verify (the reason is not told to the client)."""


@dataclass(frozen=True)
class TicketRef:
    entry_id: int
    event_id: int
    tier_id: int


def _signer() -> signing.Signer:
    return signing.Signer(salt=_SALT, sep=".")


def ticket_issue(ref: TicketRef) -> str:
    return _signer().sign(f"{ref.entry_id}-{ref.event_id}-{ref.tier_id}")


def ticket_read(ticket: str) -> TicketRef:
    # Tickets are ASCII; anything else (lone surrogates included) is not one of ours.
    if (
        not isinstance(ticket, str)
        or not ticket
        or len(ticket) > MAX_TICKET_LENGTH
        or not ticket.isascii()
    ):
        raise InvalidTicket()
    try:
        payload = _signer().unsign(ticket)
    except signing.BadSignature as exc:
        raise InvalidTicket() from exc
    match = _PAYLOAD_RE.match(payload)
    if match is None:
        raise InvalidTicket()
    entry_id, event_id, tier_id = (int(part) for part in match.groups())
    return TicketRef(entry_id=entry_id, event_id=event_id, tier_id=tier_id)
