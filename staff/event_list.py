"""The staff API's list of on-sales (docs/api.md, "Staff API"): searched by name or slug,
filtered by state, newest first, a page at a time.

Pages as the auditors' records are paged (``{"next", "previous", "results"}``, a cursor and
``page_size``), so that one client walks both the same way. Whatever a client sends that is
not a page this list gave is ``400 validation_error`` (``CheckedCursor``, which the records
use too): DRF would answer a bad cursor 404 (as if the list were gone), a bad page size with
the default (as if it were taken), and a forged position with a 500.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from events.catalogue import SEARCH_MAX_LENGTH, search, states_q
from events.models import Event, EventState
from events.validation import is_storable_text

PAGE_SIZE = 50
PAGE_SIZE_MAX = 500


class CheckedCursor(CursorPagination):
    """DRF's cursor pages, with what a client sends checked: a page size out of range, or a
    cursor whose position is not one of the ordering's values, is ``400 validation_error``
    (the auditors' records page with it too, dashboard/audit_api.py)."""

    page_size_query_param = "page_size"

    def position_ok(self, position: str) -> bool:
        """Whether ``position`` can be compared with the ordering's first field in SQL:
        anything else would fail there, as a 500, not here."""
        raise NotImplementedError

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        most = self.max_page_size
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= most):
            raise ValidationError(
                {"page_size": [f"A whole number from 1 to {most} ({self.page_size} if none)."]}
            )
        return int(raw)

    def decode_cursor(self, request: Request) -> Cursor | None:
        refused = ValidationError(
            {"cursor": ["Not a cursor of this list: follow `next` or `previous` as given."]}
        )
        try:
            cursor = super().decode_cursor(request)
        except NotFound as exc:
            raise refused from exc
        if cursor is not None and cursor.position is not None:
            if not self.position_ok(cursor.position):
                raise refused
        return cursor


class EventCursor(CheckedCursor):
    """Newest first. The cursor holds a creation time; on-sales created in the same
    microsecond are told apart by their place after it (DRF's offset), so none is skipped."""

    ordering = ("-created_at", "-id")
    page_size = PAGE_SIZE
    max_page_size = PAGE_SIZE_MAX

    def position_ok(self, position: str) -> bool:
        try:
            parsed = parse_datetime(position)
        except ValueError:
            return False
        return parsed is not None and parsed.tzinfo is not None


def _states(asked: Sequence[str]) -> list[EventState]:
    unknown = [state for state in asked if state not in EventState.values]
    if unknown:
        raise ValidationError({"state": [f"One or more of: {', '.join(EventState.values)}."]})
    return [EventState(state) for state in asked]


def events_listed(params: Any) -> QuerySet[Event]:
    """The on-sales ``q`` (in the name or slug, any case) and ``state`` (repeatable: any of
    them, as ``Event.state_at`` says now) ask for; unordered, the cursor orders them."""
    events = Event.objects.all()
    if text := params.get("q", "").strip():
        if len(text) > SEARCH_MAX_LENGTH or not is_storable_text(text):
            raise ValidationError({"q": [f"Plain text of at most {SEARCH_MAX_LENGTH} characters."]})
        events = search(events, text)
    if asked := params.getlist("state"):
        events = events.filter(states_q(_states(asked), timezone.now()))
    return events


LIST_PARAMETERS = [
    OpenApiParameter("q", str, description="Part of the name or slug, any case."),
    OpenApiParameter(
        "state",
        str,
        enum=EventState.values,
        many=True,
        explode=True,
        description="Only on-sales in this state now (repeat for several).",
    ),
    OpenApiParameter(
        "page_size",
        {"type": "integer", "minimum": 1, "maximum": PAGE_SIZE_MAX},
        description=f"{PAGE_SIZE} by default.",
    ),
    OpenApiParameter("cursor", str, description="From `next` or `previous`."),
]
