"""A fan asks about their ticket: the answer, and what asking sets off.

Asking is a heartbeat (it keeps a waiting ticket alive in the hot index), hands an admitted
fan their pass (the first hand-over is recorded: it claims the slot), and asks for a rebuild
when the hot index turns out to be lost. The hot path answers from the hot index alone while
the fan is in line there; the database is read only when it cannot answer (admitted, ended,
or being rebuilt).

While the hot index cannot answer for a fan in line (Redis away, the index missing or being
rebuilt), the answer is degraded, never refused: the entry's row is read by its key and the
fan placed from the line's snapshot in memory (line/snapshots.py), the answer saying when
its position is approximate and asking the fan to come back later (``rules/polling.py``). A
heartbeat Redis could not record flags the on-sale so that nobody expires for it
(line/heartbeat_gaps.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, close_old_connections

from events.models import Event
from queueing.hot import line_index
from queueing.hot.client import HotIndexBusy, HotIndexUnavailable
from queueing.hot.line_index import IndexState, LocateRequest, Placement, Where
from queueing.line.entry_rows import entry_row
from queueing.line.heartbeat_gaps import (
    heartbeats_recorded,
    heartbeats_unrecorded,
    heartbeats_unrecorded_due,
    heartbeats_unrecorded_flag,
)
from queueing.line.layouts import event_layout, event_layout_async
from queueing.line.reads import current_counts, degraded_position, position_from_database
from queueing.line.rebuild import request_rebuild
from queueing.line.reentry_facts import reentry_facts
from queueing.line.sessions import entry_pass
from queueing.line.snapshots import line_snapshot, line_snapshot_async
from queueing.line.throughput import current_throughput, current_throughput_async
from queueing.line.views import (
    TicketView,
    degraded_ticket_view,
    hot_ticket_view,
    position_in_tier_queue,
    ticket_view,
)
from queueing.models import QueueEntry
from queueing.rules.errors import TicketNotFound
from queueing.rules.layout import EventLayout
from queueing.rules.reentry import reentry_until
from queueing.rules.states import QUEUED, REENTERABLE, EntryStatus
from queueing.rules.ticket_codec import TicketRef, ticket_issue


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
    ref = TicketRef(entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id)
    if status in QUEUED and (placement is None or placement.counts.state is not IndexState.READY):
        # Degraded: the line's counts and the position from its snapshot (line/snapshots.py).
        snapshot = line_snapshot(layout)
        view = degraded_ticket_view(
            ref=ref,
            ticket=ticket_issue(ref),
            layout=layout,
            status=status,
            order_key=entry.order_key,
            counts=snapshot.counts(layout),
            placed=degraded_position(entry, layout, snapshot)
            if status == EntryStatus.WAITING
            else None,
            throughput=current_throughput(layout),
        )
        return replace(view, was_admitted=entry.admitted_at is not None)
    position: int | None = None
    queue_length: int | None = None
    if status in QUEUED and placement is not None:
        queue_length = placement.counts.queue_length
        if placement.where is not Where.NOWHERE:
            position = position_in_tier_queue(layout, entry.tier_id, placement)
        elif status == EntryStatus.WAITING:
            # A whole index without this fan (a join racing its own add): counted once.
            position = position_from_database(entry, layout)
    if queue_length is None:
        queue_length = current_counts(layout).queue_length
    view = ticket_view(
        ticket_issue(ref),
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
        placement = line_index.locate(
            layout,
            member=entry_id,
            tier_id=tier_id,
            heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds,
        )
    except HotIndexUnavailable:
        # Redis away, or this process's pool spent (HotIndexBusy): either way this heartbeat
        # is lost, and a pool that stays spent for a second loses them all, as an outage does.
        heartbeats_unrecorded(layout.event_id)
        return None
    heartbeats_recorded(layout.event_id)
    return placement


async def hot_ticket_poll(ref: TicketRef, ticket: str) -> TicketView | None:
    """``ticket_poll`` from the event loop, for a fan in line: from the hot index; while it
    cannot answer (Redis away, the index being rebuilt), from the entry's row and the line's
    snapshot. None otherwise (an admitted fan, a lost index, a short line, PostgreSQL
    unreachable): callers then take the synchronous way."""
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
    except HotIndexBusy:
        return None  # the event loop's pool was spent: Django's way records the heartbeat
    except HotIndexUnavailable:
        _heartbeat_unrecorded_soon(ref.event_id)
        return await _degraded_poll(ref, ticket, layout)
    heartbeats_recorded(ref.event_id)
    if placement.counts.state is IndexState.BUILDING:
        return await _degraded_poll(ref, ticket, layout)
    return hot_ticket_view(
        ref=ref,
        ticket=ticket,
        layout=layout,
        placement=placement,
        throughput=await current_throughput_async(layout),
    )


async def _degraded_poll(ref: TicketRef, ticket: str, layout: EventLayout) -> TicketView | None:
    try:
        row = await entry_row(ref.entry_id)
        if (
            row is None
            or row.event_id != ref.event_id
            or row.tier_id != ref.tier_id
            or row.status not in QUEUED
        ):
            return None
        snapshot = await line_snapshot_async(layout)
    except DatabaseError:
        return None
    placed = None
    if row.status == EntryStatus.WAITING:
        if snapshot.waiting <= settings.WR_DEGRADED_EXACT_LINE:
            return None  # counted exactly, in a thread (reads.degraded_position)
        placed = snapshot.position(layout, tier_id=row.tier_id, order_key=row.order_key)
    return degraded_ticket_view(
        ref=ref,
        ticket=ticket,
        layout=layout,
        status=row.status,
        order_key=row.order_key,
        counts=snapshot.counts(layout),
        placed=placed,
        throughput=await current_throughput_async(layout),
    )


# Flags being written from the event loop (kept so that they are not collected mid-way).
_FLAGGING: set[asyncio.Future[None]] = set()


def _heartbeat_unrecorded_soon(event_id: int) -> None:
    """``heartbeats_unrecorded`` from the event loop: the flag written in a thread, the
    poll not waiting for it."""
    if heartbeats_unrecorded_due(event_id):
        flagging = asyncio.ensure_future(asyncio.to_thread(_flag_in_thread, event_id))
        _FLAGGING.add(flagging)
        flagging.add_done_callback(_FLAGGING.discard)


def _flag_in_thread(event_id: int) -> None:
    close_old_connections()
    try:
        heartbeats_unrecorded_flag(event_id)
    finally:
        close_old_connections()
