"""The queue's refusals, as typed exceptions. Pure: no I/O, and no HTTP.

The domain raises these; the edge (``queueing/web/api_errors.py``) maps each ``code`` to the
contract's status once, for Django views, DRF and the lean ASGI paths alike. ``code`` is the
stable error code of docs/api.md; ``detail`` the sentence a person reads.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from django.utils.translation import gettext_noop


class ErrorCode(StrEnum):
    BAD_REQUEST = "bad_request"
    CONFLICT = "conflict"
    EVENT_ARCHIVED = "event_archived"
    EVENT_CLOSED = "event_closed"
    EVENT_MAINTENANCE = "event_maintenance"
    EVENT_NOT_FOUND = "event_not_found"
    EVENT_NOT_OPEN = "event_not_open"
    EVENT_SOLD_OUT = "event_sold_out"
    INVALID_ACCESS_CODE = "invalid_access_code"
    INVALID_TICKET = "invalid_ticket"
    LANES_FIXED = "lanes_fixed"
    PLACE_MOVED = "place_moved"
    QUEUE_ORDER_FIXED = "queue_order_fixed"
    POW_INVALID = "pow_invalid"
    POW_REQUIRED = "pow_required"
    QUEUE_FULL = "queue_full"
    RATE_LIMITED = "rate_limited"
    REENTRY_NOT_ALLOWED = "reentry_not_allowed"
    REGISTRATION_NOT_FOUND = "registration_not_found"
    TICKET_NOT_FOUND = "ticket_not_found"
    UNAUTHORIZED = "unauthorized"


class QueueError(Exception):
    """A refusal the contract names. ``retry_after`` (seconds) when trying again later helps.

    Each kind declares its code and default sentence in its class line:
    ``class EventClosed(QueueError, code=ErrorCode.EVENT_CLOSED, detail="...")``.
    """

    code: ClassVar[ErrorCode]
    default_detail: ClassVar[str]

    def __init_subclass__(cls, *, code: ErrorCode, detail: str, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.code, cls.default_detail = code, detail

    def __init__(self, detail: str | None = None, *, retry_after: int | None = None) -> None:
        self.detail = detail or self.default_detail
        self.retry_after = retry_after
        super().__init__(self.detail)


class InvalidInput(QueueError, code=ErrorCode.BAD_REQUEST, detail="The request is not readable."):
    """A value the queue cannot take (the edge checks shapes; this is what only it knows)."""


class NotAuthorized(
    QueueError,
    code=ErrorCode.UNAUTHORIZED,
    detail="A valid integration key for this event is required.",
):
    """A shop reporting a session without the on-sale's integration key."""


class TicketContention(
    QueueError,
    code=ErrorCode.CONFLICT,
    detail=gettext_noop("The ticket kept changing; please retry."),
):
    """Nothing was done: the ticket changed under a join or leave every time it was tried."""


class EventNotFound(
    QueueError, code=ErrorCode.EVENT_NOT_FOUND, detail="No on-sale with that slug."
):
    pass


class EventNotOpen(
    QueueError,
    code=ErrorCode.EVENT_NOT_OPEN,
    detail="The waiting room for this on-sale is not open yet.",
):
    """Before the pre-queue opens."""


class EventClosed(QueueError, code=ErrorCode.EVENT_CLOSED, detail="This on-sale has ended."):
    """After ``ends_at``, or closed by staff."""


class EventSoldOut(
    QueueError, code=ErrorCode.EVENT_SOLD_OUT, detail=gettext_noop("This on-sale is sold out.")
):
    """The shop (or staff) said the stock is gone: the on-sale closed then, for good."""


class EventMaintenance(
    QueueError,
    code=ErrorCode.EVENT_MAINTENANCE,
    detail="The on-sale is closed for maintenance.",
):
    """Staff set the on-sale's mode to ``maintenance``: nobody new joins, nobody is let in;
    fans already holding a ticket keep it."""


class InvalidAccessCode(
    QueueError, code=ErrorCode.INVALID_ACCESS_CODE, detail="That access code is not valid."
):
    """Unknown code, or none where every tier asks for one."""


class TicketNotFound(QueueError, code=ErrorCode.TICKET_NOT_FOUND, detail="No such ticket."):
    pass


class PlaceMoved(
    QueueError,
    code=ErrorCode.PLACE_MOVED,
    detail=gettext_noop("Your place moved to another device."),
):
    """The ticket names a holder the place no longer has: it was moved to another browser
    (queueing/line/place_links.py), which got the place's new ticket; this one is spent."""


class QueueFull(
    QueueError,
    code=ErrorCode.QUEUE_FULL,
    detail="The line is full. Please try again in a little while.",
):
    """At ``max_queue_length``, or the wait predicted for a newcomer is over
    ``max_wait_seconds``; ``retry_after`` says when to try again."""

    def __init__(self, *, retry_after: int) -> None:
        super().__init__(retry_after=retry_after)


class RateLimited(
    QueueError, code=ErrorCode.RATE_LIMITED, detail="Too many attempts. Please wait a moment."
):
    """Over a per-address or per-identity budget."""


class AddressLimited(
    RateLimited,
    code=ErrorCode.RATE_LIMITED,
    detail=gettext_noop("Too many places in this line are already held from your network address."),
):
    """The client address already holds the on-sale's ``max_live_per_address`` live tickets;
    one of them ending makes room."""


class ProofOfWorkRequired(
    QueueError,
    code=ErrorCode.POW_REQUIRED,
    detail="This on-sale asks for a solved challenge with each join.",
):
    """The on-sale has a ``pow_difficulty`` and the join brought no solution."""


class ProofOfWorkInvalid(
    QueueError, code=ErrorCode.POW_INVALID, detail="The challenge was not solved."
):
    """Malformed, expired, already spent, or the nonce does not solve it."""


class ReentryNotAllowed(
    QueueError,
    code=ErrorCode.REENTRY_NOT_ALLOWED,
    detail=gettext_noop("This ticket cannot go back in line."),
):
    """A ``reenter`` the rules refuse; ``detail`` says why (queueing/rules/states.py)."""


class EventArchived(
    QueueError,
    code=ErrorCode.EVENT_ARCHIVED,
    detail="This on-sale is archived: its line and audit trail left the room for an archive "
    "file, and it can no longer change.",
):
    """Staff asked to change an on-sale whose trail was archived (queueing/line/archives.py):
    the change would need a chain that is no longer in the room. Staff's sentence only (the
    dashboard may stay in English): not among the fans' strings to translate."""


class LanesFixed(
    QueueError,
    code=ErrorCode.LANES_FIXED,
    detail=gettext_noop(
        "The number of lanes cannot change once anyone is in this on-sale's line: each fan's "
        "lane was drawn from it."
    ),
):
    """Staff asked to change an on-sale's ``lanes`` after its first join
    (queueing/rules/lanes.py)."""


class QueueOrderFixed(
    QueueError,
    code=ErrorCode.QUEUE_ORDER_FIXED,
    detail=gettext_noop(
        "The queue order cannot change once anyone is in this on-sale's line: it would "
        "reorder the fans already waiting."
    ),
):
    """Staff asked to change an on-sale's ``queue_order`` after its first join
    (queueing/rules/shuffle.py, ``place_key``)."""


class AdmissionBusy(
    QueueError,
    code=ErrorCode.CONFLICT,
    detail="Fans are being let in for this on-sale at this moment; ask again in a second.",
):
    """Staff's "admit N now" found another admission run holding the on-sale's lock: nobody
    was let in by it (queueing/line/admission.py)."""


class RegistrationLinkInvalid(
    QueueError, code=ErrorCode.UNAUTHORIZED, detail="That confirmation link is not valid."
):
    """A registration's confirmation token that names no registration or fails its key."""


class DrawDone(
    QueueError,
    code=ErrorCode.CONFLICT,
    detail="The draw has taken place: its registration window can no longer change.",
):
    """Staff changing a registration window whose list is frozen and drawn."""


class RegistrationNotFound(
    QueueError, code=ErrorCode.REGISTRATION_NOT_FOUND, detail="No such registration."
):
    pass
