"""A fan's status from the event loop: the hot index's answer, without a thread hop.

Shared by the lean status path (queueing/hot_paths.py) and the waiting page's WebSocket
(queueing/consumers.py). None means the hot index cannot answer (an admitted fan, an index
being rebuilt, Redis or PostgreSQL unreachable): callers then take the synchronous way,
``queueing.services.ticket_status``, which reads the database.
"""

from __future__ import annotations

import time

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections

from queueing import hot_index
from queueing.hot_index import HotIndexUnavailable, LocateRequest
from queueing.layout import EventLayout, cached_layout, event_layout
from queueing.services import TicketView, hot_ticket_view
from queueing.throughput import current_throughput_async
from queueing.tickets import TicketRef


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


async def hot_ticket_status(ref: TicketRef, ticket: str) -> TicketView | None:
    try:
        layout = await event_layout_async(ref.event_id)
    except DatabaseError:
        return None
    if layout is None or layout.tier_index(ref.tier_id) is None:
        return None
    try:
        placement = await hot_index.locate_async(
            layout,
            LocateRequest(
                member=ref.entry_id,
                tier_id=ref.tier_id,
                heartbeat_deadline=time.time() + layout.heartbeat_seconds,
            ),
        )
    except HotIndexUnavailable:
        return None
    return hot_ticket_view(
        ref=ref,
        ticket=ticket,
        layout=layout,
        placement=placement,
        throughput=await current_throughput_async(layout),
    )
