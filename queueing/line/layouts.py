"""Each event's layout, read from PostgreSQL and cached briefly in-process.

The hot status path needs the tier layout to name the Redis keys it counts; reading it from
PostgreSQL on every poll would put the database back on the hot path, and tiers change rarely.
"""

from __future__ import annotations

import threading
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections

from events.models import Event, Tier
from queueing.rules.eta import configured_pace
from queueing.rules.layout import EventLayout, TierLayout

_cache: dict[int, tuple[float, EventLayout | None]] = {}


_lock = threading.Lock()


def _load(event_id: int) -> EventLayout | None:
    event = (
        Event.objects.filter(pk=event_id)
        .values("slug", "heartbeat_seconds", "rate_per_minute", "capacity", "session_seconds")
        .first()
    )
    if event is None:
        return None
    tiers = Tier.objects.filter(event_id=event_id).order_by("priority", "id")
    return EventLayout(
        event_id=event_id,
        slug=event["slug"],
        heartbeat_seconds=event["heartbeat_seconds"],
        pace=configured_pace(
            rate_per_minute=event["rate_per_minute"],
            capacity=event["capacity"],
            session_seconds=event["session_seconds"],
        ),
        tiers=tuple(TierLayout(id=t.id, priority=t.priority, share=t.share) for t in tiers),
    )


def event_layout(event_id: int, *, fresh: bool = False) -> EventLayout | None:
    now = time.monotonic()
    if not fresh:
        cached = _cache.get(event_id)
        if cached is not None and cached[0] > now:
            return cached[1]
    layout = _load(event_id)
    with _lock:
        _cache[event_id] = (now + settings.WR_LAYOUT_CACHE_SECONDS, layout)
    return layout


def cached_layout(event_id: int) -> EventLayout | None:
    """The layout if this process read it recently, without touching the database (for
    the event loop); None when it must be read."""
    cached = _cache.get(event_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    return None


def layout_cache_clear() -> None:
    with _lock:
        _cache.clear()


async def event_layout_async(event_id: int) -> EventLayout | None:
    """The event's layout (cached in-process), read in a thread only when the cache is cold;
    raises DatabaseError when it must be read and cannot."""
    layout = cached_layout(event_id)
    if layout is None:
        layout = await sync_to_async(_read_layout)(event_id)
    return layout


def _read_layout(event_id: int) -> EventLayout | None:
    # As around a Django request: a connection that broke (PostgreSQL restarted) is not
    # kept in this thread for the next read.
    close_old_connections()
    try:
        return event_layout(event_id)
    finally:
        close_old_connections()
