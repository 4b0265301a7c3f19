"""The queue's refusals, as typed exceptions. Pure: no I/O, and no HTTP.

The domain raises these; the edge (``config/api_errors.py``) maps each ``code`` to the
contract's status once, for Django views, DRF and the lean ASGI paths alike. ``code`` is the
stable error code of docs/api.md; ``detail`` the sentence a person reads.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar


class ErrorCode(StrEnum):
    BAD_REQUEST = "bad_request"
    CONFLICT = "conflict"
    EVENT_CLOSED = "event_closed"
    EVENT_NOT_FOUND = "event_not_found"
    EVENT_NOT_OPEN = "event_not_open"
    INVALID_ACCESS_CODE = "invalid_access_code"
    INVALID_TICKET = "invalid_ticket"
    POW_INVALID = "pow_invalid"
    POW_REQUIRED = "pow_required"
    QUEUE_FULL = "queue_full"
    RATE_LIMITED = "rate_limited"
    TICKET_NOT_FOUND = "ticket_not_found"
    UNAUTHORIZED = "unauthorized"


class QueueError(Exception):
    """A refusal the contract names. ``retry_after`` (seconds) when trying again later helps."""

    code: ClassVar[ErrorCode]
    default_detail: ClassVar[str]

    def __init__(self, detail: str | None = None, *, retry_after: int | None = None) -> None:
        self.detail = detail or self.default_detail
        self.retry_after = retry_after
        super().__init__(self.detail)


class InvalidInput(QueueError):
    code = ErrorCode.BAD_REQUEST
    default_detail = "The request could not be read."


class TicketContention(QueueError):
    """A ticket kept changing under a join or leave: nothing was done, retry."""

    code = ErrorCode.CONFLICT
    default_detail = "The ticket kept changing; please retry."


class EventNotFound(QueueError):
    code = ErrorCode.EVENT_NOT_FOUND
    default_detail = "No on-sale with that slug."


class EventNotOpen(QueueError):
    code = ErrorCode.EVENT_NOT_OPEN
    default_detail = "The waiting room for this on-sale is not open yet."


class EventClosed(QueueError):
    code = ErrorCode.EVENT_CLOSED
    default_detail = "This on-sale has ended."


class InvalidAccessCode(QueueError):
    code = ErrorCode.INVALID_ACCESS_CODE
    default_detail = "That access code is not valid."


class TicketNotFound(QueueError):
    code = ErrorCode.TICKET_NOT_FOUND
    default_detail = "No such ticket."


class QueueFull(QueueError):
    code = ErrorCode.QUEUE_FULL
    default_detail = "The line is full. Please try again in a little while."

    def __init__(self, *, retry_after: int) -> None:
        super().__init__(retry_after=retry_after)


class RateLimited(QueueError):
    code = ErrorCode.RATE_LIMITED
    default_detail = "Too many attempts. Please wait a moment."


class ProofOfWorkRequired(QueueError):
    code = ErrorCode.POW_REQUIRED
    default_detail = "This on-sale asks for a solved challenge with each join."


class ProofOfWorkInvalid(QueueError):
    code = ErrorCode.POW_INVALID
    default_detail = "The challenge was not solved."


class NotAuthorized(QueueError):
    code = ErrorCode.UNAUTHORIZED
    default_detail = "A valid integration key for this event is required."
