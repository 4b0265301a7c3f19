"""On-sales by state, in SQL: the catalogue's filters, counts and order.

``Event.state_at`` decides one on-sale's state in Python. Listing a thousand on-sales by
state must not load them all to ask each, so the same decision is written here as query
conditions, one per state; tests/events/test_catalogue.py holds the two in agreement,
boundaries included.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable
from datetime import datetime

from django.db import models
from django.db.models import Count, F, Q, QuerySet
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce, Least

from events.models import Event, EventControl, EventState

# The longest search text taken: a name is at most 200 characters, and the search runs
# over every on-sale's name and slug.
SEARCH_MAX_LENGTH = 200


class Group(models.TextChoices):
    """What staff ask of the list: where fans are now, what is coming, what is over."""

    LIVE = "live", "Live"
    UPCOMING = "upcoming", "Upcoming"
    ENDED = "ended", "Ended"


# Live means fans are in the room: joining the pre-queue, let in, or held by a pause.
GROUP_STATES: dict[Group, tuple[EventState, ...]] = {
    Group.LIVE: (EventState.PREQUEUE, EventState.OPEN, EventState.PAUSED),
    Group.UPCOMING: (EventState.SCHEDULED,),
    Group.ENDED: (EventState.CLOSED,),
}


def _closed(now: datetime) -> Q:
    return Q(control=EventControl.CLOSED) | Q(ends_at__lte=now)


def _not_closed(now: datetime) -> Q:
    # Spelt out rather than ~_closed(now): a NULL ends_at means open-ended, and the
    # explicit form says so instead of leaning on how negation treats NULL.
    return ~Q(control=EventControl.CLOSED) & (Q(ends_at__isnull=True) | Q(ends_at__gt=now))


def _prequeue_opened(now: datetime) -> Q:
    return Q(prequeue_opens_at__isnull=True) | Q(prequeue_opens_at__lte=now)


def _started(now: datetime) -> Q:
    return Q(starts_at__isnull=True) | Q(starts_at__lte=now)


def state_q(state: EventState, now: datetime) -> Q:
    """The on-sales whose ``state_at(now)`` is ``state``: each branch of ``state_at`` in turn,
    every later one under the negation of those before it."""
    if state == EventState.CLOSED:
        return _closed(now)
    if state == EventState.SCHEDULED:
        return _not_closed(now) & Q(prequeue_opens_at__gt=now)
    if state == EventState.PREQUEUE:
        return _not_closed(now) & _prequeue_opened(now) & Q(starts_at__gt=now)
    running = _not_closed(now) & _prequeue_opened(now) & _started(now)
    if state == EventState.PAUSED:
        return running & Q(control=EventControl.PAUSED)
    if state == EventState.OPEN:
        return running & ~Q(control=EventControl.PAUSED)
    raise ValueError(f"unknown state {state!r}")


def states_q(states: Iterable[EventState], now: datetime) -> Q:
    conditions = [state_q(state, now) for state in states]
    if not conditions:
        raise ValueError("no state asked for")
    return functools.reduce(operator.or_, conditions)


def group_q(group: Group, now: datetime) -> Q:
    return states_q(GROUP_STATES[group], now)


def in_states(
    queryset: QuerySet[Event], states: Iterable[EventState], now: datetime
) -> QuerySet[Event]:
    return queryset.filter(states_q(states, now))


def _ended_at() -> Least:
    # When it actually ended: staff closing it early, or the end of its schedule. PostgreSQL's
    # LEAST skips NULLs, so either alone will do.
    return Least("closed_at", "ends_at")


def _group_order(group: Group) -> tuple[OrderBy | str, ...]:
    if group == Group.UPCOMING:
        # Scheduled means the pre-queue opens later, so prequeue_opens_at is never NULL here.
        return ("prequeue_opens_at", "starts_at", "id")
    if group == Group.LIVE:
        # No start time means admission started when the on-sale was created.
        return (Coalesce("starts_at", "created_at").asc(), "id")
    return (F("ended_at").desc(nulls_last=True), "-id")


def in_group(queryset: QuerySet[Event], group: Group, now: datetime) -> QuerySet[Event]:
    """The group's on-sales in the order staff read them: upcoming soonest first, live by
    start, ended most recently ended first. Each row carries ``ended_at``."""
    return (
        queryset.filter(group_q(group, now))
        .annotate(ended_at=_ended_at())
        .order_by(*_group_order(group))
    )


def group_counts(queryset: QuerySet[Event], now: datetime) -> dict[Group, int]:
    """How many on-sales each group holds, in one aggregate query."""
    totals = queryset.aggregate(
        **{group.value: Count("id", filter=group_q(group, now)) for group in Group}
    )
    return {group: totals[group.value] for group in Group}


def search(queryset: QuerySet[Event], text: str) -> QuerySet[Event]:
    """On-sales whose name or slug contains ``text``, case-insensitively (all when empty)."""
    text = text.strip()[:SEARCH_MAX_LENGTH]
    if not text:
        return queryset
    return queryset.filter(Q(name__icontains=text) | Q(slug__icontains=text))
