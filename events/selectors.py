"""Reads of on-sales."""

from __future__ import annotations

from events.codes import SLUG_RE
from events.models import Event
from queueing.rules.errors import EventNotFound


def event_by_slug(slug: str) -> Event:
    """The on-sale, or the API's 404. The slug is checked first: PostgreSQL refuses NUL."""
    event = Event.objects.filter(slug=slug).first() if SLUG_RE.match(slug) else None
    if event is None:
        raise EventNotFound()
    return event
