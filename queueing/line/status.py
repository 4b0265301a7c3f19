"""A fan asks about their ticket: the answer, and what asking sets off.

Asking is a heartbeat (it keeps a waiting ticket alive in the hot index), hands an admitted
fan their pass (the first hand-over is recorded: it claims the slot), and asks for a rebuild
when the hot index turns out to be lost. The hot path answers from the hot index alone while
the fan is in line there; the database is read only when it cannot answer (admitted, ended,
or being rebuilt).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime

from django.db import DatabaseError

from events.models import Event
from queueing.hot import line_index
from queueing.hot.client import HotIndexUnavailable
from queueing.hot.line_index import IndexState, LocateRequest, Placement, Where
from queueing.line.layouts import event_layout, event_layout_async
from queueing.line.reads import current_counts, position_from_database
from queueing.line.rebuild import request_rebuild
from queueing.line.reentry_facts import reentry_facts
from queueing.line.sessions import entry_pass
from queueing.line.throughput import current_throughput, current_throughput_async
from queueing.line.views import TicketView, hot_ticket_view, position_in_tier_queue, ticket_view
from queueing.models import QueueEntry
from queueing.rules.errors import TicketNotFound
from queueing.rules.layout import EventLayout
from queueing.rules.reentry import reentry_until
from queueing.rules.states import QUEUED, REENTERABLE, EntryStatus
from queueing.rules.tickets import TicketRef, ticket_issue


def layout_with_tier(event_id: int, *tier_ids: int) -> EventLayout:
    """The event's layout, read again if it does not know these tiers yet (just added)."""
    layout = event_layout(event_id)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        layout = event_layout(event_id, fresh=True)
    if layout is None or any(layout.tier_index(t) is None for t in tier_ids):
        raise TicketNotFound()
    return layout


def entry_describe(
    entry: QueueEntry, *, layout: EventLayout, placement: Placement | None
) -> TicketView:
    """What the fan is told about an entry whose row is at hand, given where the hot index
    has it (None: no answer). Reads only: the pass is not part of it (see ``entry_answer``)."""
    status = EntryStatus(entry.status)
    position: int | None = None
    queue_length: int | None = None
    if status in QUEUED:
        if (
            placement is not None
            and placement.counts.state is IndexState.READY
            and placement.where is not Where.NOWHERE
        ):
            queue_length = placement.counts.queue_length
            position = position_in_tier_queue(layout, entry.tier_id, placement)
        elif status == EntryStatus.WAITING:
            position = position_from_database(entry, layout)
    if queue_length is None:
        # From the hot index when it is whole; PostgreSQL only in degraded mode.
        queue_length = current_counts(layout).queue_length
    view = ticket_view(
        ticket_issue(TicketRef(entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id)),
        layout,
        status,
        position,
        queue_length,
        throughput=current_throughput(layout) if position is not None else None,
        tier_id=entry.tier_id,
        order_key=entry.order_key if status in QUEUED else None,
    )
    return replace(view, was_admitted=entry.admitted_at is not None)


def entry_answer(
    entry: QueueEntry, *, now: datetime, layout: EventLayout, placement: Placement | None
) -> TicketView:
    """``entry_describe``, plus what telling the fan sets off: an admitted fan is handed
    their pass, and a hot index found lost is sent for rebuilding."""
    if (
        entry.status in QUEUED
        and placement is not None
        and placement.counts.state is IndexState.MISSING
    ):
        request_rebuild(entry.event_id)
    view = entry_describe(entry, layout=layout, placement=placement)
    if view.status == EntryStatus.ADMITTED:
        event = Event.objects.get(pk=entry.event_id)
        view = replace(view, issued_pass=entry_pass(entry, event=event, now=now))
    elif view.was_admitted and view.status in REENTERABLE:
        event = Event.objects.get(pk=entry.event_id)
        view = replace(
            view, reentry_until=reentry_until(reentry_facts(entry, event, now=now), now=now)
        )
    return view


def entry_poll(
    entry: QueueEntry, *, now: datetime, layout: EventLayout | None = None
) -> TicketView:
    """The fan's answer for an entry whose row is at hand, refreshing its heartbeat."""
    layout = layout or layout_with_tier(entry.event_id, entry.tier_id)
    placement = None
    if entry.status in QUEUED:
        placement = _locate(layout, entry.id, entry.tier_id, now=now)
    return entry_answer(entry, now=now, layout=layout, placement=placement)


def ticket_poll(*, ref: TicketRef, ticket: str, now: datetime) -> TicketView:
    """The fan polls their ticket (a heartbeat): answered from the hot index alone while
    the fan is in line there; the database is read only when the index cannot answer."""
    layout = layout_with_tier(ref.event_id, ref.tier_id)
    placement = _locate(layout, ref.entry_id, ref.tier_id, now=now)
    if placement is not None:
        view = hot_ticket_view(
            ref=ref,
            ticket=ticket,
            layout=layout,
            placement=placement,
            throughput=current_throughput(layout),
        )
        if view is not None:
            return view
    entry = (
        QueueEntry.objects.filter(pk=ref.entry_id, event_id=ref.event_id)
        .select_related("tier")
        .first()
    )
    if entry is None:
        raise TicketNotFound()
    return entry_answer(entry, now=now, layout=layout, placement=placement)


def _locate(layout: EventLayout, entry_id: int, tier_id: int, *, now: datetime) -> Placement | None:
    try:
        return line_index.locate(
            layout,
            member=entry_id,
            tier_id=tier_id,
            heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds,
        )
    except HotIndexUnavailable:
        return None


async def hot_ticket_poll(ref: TicketRef, ticket: str) -> TicketView | None:
    """``ticket_poll`` from the event loop, for a fan the hot index alone can answer; None
    otherwise (an admitted fan, an index being rebuilt, Redis or PostgreSQL unreachable):
    callers then take the synchronous way, which reads the database."""
    try:
        layout = await event_layout_async(ref.event_id)
    except DatabaseError:
        return None
    if layout is None or layout.tier_index(ref.tier_id) is None:
        return None
    try:
        placement = await line_index.locate_async(
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
