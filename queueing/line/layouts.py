"""On-sales as the line reads them: found by slug (the queue's own not-found), and each one's
layout, read from PostgreSQL and cached briefly in-process.

The hot status path needs the tier layout to name the Redis keys it counts; reading it from
PostgreSQL on every poll would put the database back on the hot path, and tiers change rarely.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from events.models import Event, EventControl, Tier
from events.validation import SLUG_RE
from queueing.in_process import ProcessCache, closes_old_connections
from queueing.rules.errors import EventNotFound, TicketNotFound
from queueing.rules.eta import configured_pace, settings_throughput
from queueing.rules.layout import EventLayout, TierLayout


def event_by_slug(slug: str) -> Event:
    """The on-sale, or the queue's EventNotFound. The slug is checked first: PostgreSQL
    refuses NUL."""
    event = Event.objects.filter(slug=slug).first() if SLUG_RE.match(slug) else None
    if event is None:
        raise EventNotFound()
    return event


_layouts: ProcessCache[int, EventLayout | None] = ProcessCache(
    "layouts", seconds=lambda: settings.WR_LAYOUT_CACHE_SECONDS
)


_EVENT_FIELDS = (
    "id",
    "slug",
    "heartbeat_seconds",
    "rate_per_minute",
    "capacity",
    "session_seconds",
    "message",
    "control",
)


def _build(event: dict[str, Any], tiers: list[Tier]) -> EventLayout:
    return EventLayout(
        event_id=event["id"],
        slug=event["slug"],
        heartbeat_seconds=event["heartbeat_seconds"],
        pace=configured_pace(
            rate_per_minute=event["rate_per_minute"],
            capacity=event["capacity"],
            session_seconds=event["session_seconds"],
        ),
        tiers=tuple(TierLayout(id=t.id, priority=t.priority, share=t.share) for t in tiers),
        settings_pace=settings_throughput(
            rate_per_minute=event["rate_per_minute"],
            capacity=event["capacity"],
            session_seconds=event["session_seconds"],
        ),
        message=event["message"],
        paused=event["control"] == EventControl.PAUSED,
    )


def _load_many(event_ids: Collection[int]) -> dict[int, EventLayout | None]:
    """The events' layouts in two queries however many they are (None for a missing event)."""
    layouts: dict[int, EventLayout | None] = dict.fromkeys(event_ids)
    events = list(Event.objects.filter(pk__in=event_ids).values(*_EVENT_FIELDS))
    if not events:
        return layouts
    tiers: dict[int, list[Tier]] = {event["id"]: [] for event in events}
    for tier in Tier.objects.filter(event_id__in=tiers).order_by("priority", "id"):
        tiers[tier.event_id].append(tier)
    for event in events:
        layouts[event["id"]] = _build(event, tiers[event["id"]])
    return layouts


def _remember(layouts: dict[int, EventLayout | None], read_at: float) -> None:
    for event_id, layout in layouts.items():
        _layouts.put(event_id, layout, kept_at=read_at)


def event_layout(event_id: int, *, fresh: bool = False) -> EventLayout | None:
    return event_layouts([event_id], fresh=fresh)[event_id]


def event_layouts(
    event_ids: Collection[int], *, fresh: bool = False
) -> dict[int, EventLayout | None]:
    """Layouts of several events (a page of the staff catalogue): the ones this process read
    recently from the cache, all the others in one read."""
    read_at = time.monotonic()
    found: dict[int, EventLayout | None] = {}
    if not fresh:
        for event_id in event_ids:
            hit, layout = _layouts.fresh(event_id)
            if hit:
                found[event_id] = layout
    missing = [event_id for event_id in event_ids if event_id not in found]
    if missing:
        loaded = _load_many(missing)
        _remember(loaded, read_at)
        found.update(loaded)
    return found


def layout_with_tier(event_id: int, *tier_ids: int) -> EventLayout:
    """The event's layout, read again if it does not know these tiers yet (just added);
    TicketNotFound when the event or a tier does not exist."""
    layout = event_layout(event_id)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        layout = event_layout(event_id, fresh=True)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        raise TicketNotFound()
    return layout


@sync_to_async
@closes_old_connections
def _event_layout_in_thread(event_id: int) -> EventLayout | None:
    return event_layout(event_id)


async def event_layout_async(event_id: int) -> EventLayout | None:
    """The event's layout from the event loop: the one this process read recently, else read
    in a thread; raises DatabaseError when it must be read and cannot."""
    _, layout = _layouts.fresh(event_id)
    if layout is None:
        layout = await _event_layout_in_thread(event_id)
    return layout
