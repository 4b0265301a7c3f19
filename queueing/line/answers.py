"""What a fan is told about their ticket (a ``TicketAnswer``), and what asking sets off.

One word for one thing: the fan **polls** (a heartbeat: it keeps a waiting ticket alive in
the hot index) and gets an **answer**. The answers are built from facts at hand by pure
functions (``answer_from_facts``, and for a fan in line ``answer_from_index`` or
``answer_from_snapshot``; ``answer_unplaced`` when a join could describe nothing more); the
lean ASGI path builds them too. ``entry_answer`` describes an entry whose row is at hand and
does what telling the fan sets off: an admitted fan is handed their pass (the first
hand-over is recorded: it claims the slot), a hot index found lost is sent for rebuilding.

The hot path answers from the hot index alone while the fan is in line there; the database
is read only when it cannot answer (admitted, ended, or being rebuilt). While the hot index
cannot answer for a fan in line (Redis away, the index missing or being rebuilt), the answer
is degraded, never refused: the entry's row is read by its key and the fan placed from the
line's snapshot (line/reads.py decides), the answer saying when its position is approximate
and asking the fan to come back later (``rules/layout.py``).

A place moved to another browser answers only the ticket naming its holder key
(``rules/ticket_codec.py``): the hot index sends any other ticket of it here
(``Placement.held_elsewhere``), and its row refuses it (``PlaceMoved``) before anything is
told or handed over.

Over 350 lines on purpose: every way a fan's answer is made, the lean path's included, reads
best side by side, so that they cannot drift apart.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError

from events.models import Event, EventMode, EventState
from queueing.hot.client import HotIndexBusy
from queueing.hot.line_index import IndexState, LineCounts, LocateRequest, Placement, Where
from queueing.line.away import away_back
from queueing.line.expiry import heartbeat, heartbeat_async
from queueing.line.index_sync import request_rebuild
from queueing.line.reads import event_layout_async, layout_with_tier, line_reads
from queueing.line.sessions import IssuedPass, entry_pass
from queueing.line.snapshots import line_snapshot, line_snapshot_async
from queueing.models import QueueEntry
from queueing.records.entry_reads import entry_row, position_counted
from queueing.rules.errors import TicketNotFound
from queueing.rules.eta import Eta, Throughput, estimate_wait
from queueing.rules.layout import (
    EventLayout,
    SketchedPosition,
    poll_after_seconds,
    position_in_line,
)
from queueing.rules.place_links import ticket_holder_check
from queueing.rules.states import QUEUED, REENTERABLE, EntryStatus, ReentryFacts, reentry_until
from queueing.rules.ticket_codec import TicketRef, ticket_issue


@dataclass(frozen=True)
class TicketAnswer:
    """What a fan is told about a ticket."""

    ticket: str
    event_slug: str
    status: EntryStatus
    position: int | None
    queue_length: int
    poll_after_seconds: float
    eta: Eta | None = None
    issued_pass: IssuedPass | None = None
    # Where the fan stands in its tier's order (for pages placing themselves from ticks).
    tier_id: int | None = None
    order_key: int | None = None
    # The fan had a session in the shop that ended without completing, and may go back in
    # line until then (queueing/rules/states.py); None otherwise.
    reentry_until: datetime | None = None
    # The ticket's last session was in the shop (its end is told apart from a lapsed place).
    was_admitted: bool = False
    # Staff's word to the line, or None (from the on-sale's cached layout).
    message: str | None = None
    # The position was placed between two checkpoints of a snapshot of the line (the hot
    # index could not answer), not counted: it is near, not exact.
    approximate: bool = False
    # When the sale sold out, and staff's word about it (from the cached layout), or None.
    sold_out_at: datetime | None = None
    sold_out_message: str | None = None


# ---------------------------------------------------------------- built from facts


def answer_from_facts(
    ticket: str,
    layout: EventLayout,
    status: EntryStatus,
    position: int | None,
    queue_length: int,
    *,
    throughput: Throughput | None,
    tier_id: int,
    order_key: int | None,
    issued: IssuedPass | None = None,
    degraded: bool = False,
    approximate: bool = False,
) -> TicketAnswer:
    """A fan's answer from what is known of their entry and the line; ``degraded``: known
    without the hot index (the fan is asked to come back later)."""
    # While staff hold the line nobody knows when it moves again: no wait rather than one
    # that leaves the pause out.
    eta = None
    if position is not None and not layout.paused:
        eta = estimate_wait(position, throughput, tier_id)
    return TicketAnswer(
        ticket=ticket,
        event_slug=layout.slug,
        status=status,
        position=position,
        queue_length=queue_length,
        poll_after_seconds=poll_after_seconds(
            heartbeat_seconds=layout.heartbeat_seconds, position=position, degraded=degraded
        ),
        eta=eta,
        issued_pass=issued,
        tier_id=tier_id,
        order_key=order_key,
        message=layout.message or None,
        approximate=approximate,
        sold_out_at=layout.sold_out_at,
        sold_out_message=layout.sold_out_message or None,
    )


def _position_in_tier(layout: EventLayout, tier_id: int, placement: Placement) -> int | None:
    """The fan's place in the whole line, when the index found them in their tier's queue."""
    if placement.where is not Where.TIER or placement.rank is None:
        return None
    return position_in_line(
        layout, tier_id=tier_id, rank_in_tier=placement.rank, tier_counts=placement.counts.tiers
    )


def answer_from_index(
    *,
    ref: TicketRef,
    ticket: str,
    layout: EventLayout,
    placement: Placement,
    throughput: Throughput | None,
) -> TicketAnswer | None:
    """What the hot index alone can tell a fan in line (waiting or in the pre-queue); None
    when it cannot answer (not there, being rebuilt): then the database must be read.
    Pure, so that the lean ASGI status path and ``ticket_poll`` share it."""
    if placement.counts.state is not IndexState.READY or placement.held_elsewhere:
        return None
    position = _position_in_tier(layout, ref.tier_id, placement)
    if position is not None:
        status = EntryStatus.WAITING
    elif placement.where is Where.PREQUEUE:
        position, status = None, EntryStatus.PREQUEUE
    else:
        return None
    return answer_from_facts(
        ticket,
        layout,
        status,
        position,
        placement.counts.queue_length,
        throughput=throughput,
        tier_id=ref.tier_id,
        order_key=placement.order_key,
        approximate=position is not None and placement.approximate,
    )


def answer_from_snapshot(
    *,
    ref: TicketRef,
    ticket: str,
    layout: EventLayout,
    status: EntryStatus,
    order_key: int,
    counts: LineCounts,
    placed: SketchedPosition | None,
    throughput: Throughput | None,
) -> TicketAnswer:
    """A fan in line (waiting or in the pre-queue) told where they stand without the hot
    index: from the line's counts and, while waiting, the position placed from a snapshot
    (or counted: ``placed.exact``). Pure, shared by the lean path and ``ticket_poll``."""
    position = placed.position if placed is not None and status == EntryStatus.WAITING else None
    return answer_from_facts(
        ticket,
        layout,
        status,
        position,
        counts.queue_length,
        throughput=throughput,
        tier_id=ref.tier_id,
        order_key=order_key,
        degraded=True,
        approximate=position is not None and placed is not None and not placed.exact,
    )


def answer_unplaced(
    entry: QueueEntry, *, layout: EventLayout, placement: Placement | None
) -> TicketAnswer:
    """An entry described without any further read (what a join can still answer when
    PostgreSQL or Redis failed right after its commit): its ticket and status."""
    counts = placement.counts if placement is not None else None
    return answer_from_facts(
        ticket_issue(entry_ticket_ref(entry)),
        layout,
        EntryStatus(entry.status),
        None,
        counts.queue_length if counts is not None and counts.state is IndexState.READY else 0,
        throughput=None,
        tier_id=entry.tier_id,
        order_key=entry.order_key,
    )


def entry_ticket_ref(entry: QueueEntry) -> TicketRef:
    """What the entry's ticket names: its ids and its holder key (a moved place's)."""
    holder = entry.holder_key
    # A row a join just inserted holds the database's default, unread: a place never moved.
    if not isinstance(holder, str):
        holder = ""
    return TicketRef(
        entry_id=entry.id,
        event_id=entry.event_id,
        tier_id=entry.tier_id,
        holder=holder,
        lane=entry.lane,
    )


def reentry_facts(entry: QueueEntry, event: Event, *, now: datetime) -> ReentryFacts:
    """What the re-entry rule (rules/states.py) is told about an entry and its on-sale:
    read by the ticket's answer (``reentry_until``) and by the re-entry itself."""
    return ReentryFacts(
        status=EntryStatus(entry.status),
        was_admitted=entry.admitted_at is not None,
        ended_at=entry.ended_at,
        reentered_at=entry.reentered_at,
        reentry_seconds=event.reentry_seconds,
        event_closed=event.state_at(now) == EventState.CLOSED,
        event_in_maintenance=event.mode == EventMode.MAINTENANCE,
    )


# ------------------------------------------------------------------ an entry at hand


def entry_answer(
    entry: QueueEntry, *, now: datetime, layout: EventLayout, placement: Placement | None
) -> TicketAnswer:
    """The fan's answer for an entry whose row is at hand, given where the hot index has it
    (None: no answer), and what telling them sets off: an admitted fan is handed their pass,
    and a hot index found lost is sent for rebuilding."""
    if entry.status == EntryStatus.WAITING and entry.passed_over_at is not None:
        # Passed over while away, and asking again: back at the front of their tier.
        placement = away_back(entry, layout=layout, now=now) or placement
    if (
        entry.status in QUEUED
        and placement is not None
        and placement.counts.state is IndexState.MISSING
    ):
        request_rebuild(entry.event_id)
    answer = _entry_described(entry, layout=layout, placement=placement)
    if answer.status == EntryStatus.ADMITTED:
        event = Event.objects.get(pk=entry.event_id)
        answer = replace(answer, issued_pass=entry_pass(entry, event=event, now=now))
    elif answer.was_admitted and answer.status in REENTERABLE:
        event = Event.objects.get(pk=entry.event_id)
        answer = replace(
            answer, reentry_until=reentry_until(reentry_facts(entry, event, now=now), now=now)
        )
    return answer


def _entry_described(
    entry: QueueEntry, *, layout: EventLayout, placement: Placement | None
) -> TicketAnswer:
    """``entry_answer`` without what it sets off: reads only, the pass not part of it."""
    status = EntryStatus(entry.status)
    ref = entry_ticket_ref(entry)
    if status in QUEUED and (placement is None or placement.counts.state is not IndexState.READY):
        # Degraded: the line's counts and the position from its snapshot (line/reads.py).
        snapshot = line_snapshot(layout)
        answer = answer_from_snapshot(
            ref=ref,
            ticket=ticket_issue(ref),
            layout=layout,
            status=status,
            order_key=entry.order_key,
            counts=snapshot.counts(layout),
            placed=line_reads.position(entry, layout, snapshot)
            if status == EntryStatus.WAITING
            else None,
            throughput=line_reads.throughput(layout),
        )
        return replace(answer, was_admitted=entry.admitted_at is not None)
    position: int | None = None
    queue_length: int | None = None
    if status in QUEUED and placement is not None:
        queue_length = placement.counts.queue_length
        if placement.where is not Where.NOWHERE:
            position = _position_in_tier(layout, entry.tier_id, placement)
        elif status == EntryStatus.WAITING:
            # A whole index without this fan (a join racing its own add): counted once.
            position = position_counted(entry, layout.tiers)
    if queue_length is None:
        queue_length = line_reads.counts(layout).queue_length
    answer = answer_from_facts(
        ticket_issue(ref),
        layout,
        status,
        position,
        queue_length,
        throughput=line_reads.throughput(layout) if position is not None else None,
        tier_id=entry.tier_id,
        order_key=entry.order_key if status in QUEUED else None,
        approximate=position is not None and placement is not None and placement.approximate,
    )
    return replace(answer, was_admitted=entry.admitted_at is not None)


def entry_poll(
    entry: QueueEntry, *, now: datetime, layout: EventLayout | None = None
) -> TicketAnswer:
    """The fan's answer for an entry whose row is at hand, refreshing its heartbeat."""
    layout = layout or layout_with_tier(entry.event_id, entry.tier_id)
    placement = None
    if entry.status in QUEUED:
        placement = heartbeat(
            layout,
            member=entry.id,
            tier_id=entry.tier_id,
            now=now,
            holder=entry.holder_key,
            lane=entry.lane,
        )
    return entry_answer(entry, now=now, layout=layout, placement=placement)


# ------------------------------------------------------------------ a ticket polled


def ticket_poll(*, ref: TicketRef, ticket: str, now: datetime) -> TicketAnswer:
    """The fan polls their ticket (a heartbeat): answered from the hot index alone while
    the fan is in line there; the database is read only when the index cannot answer.
    PlaceMoved when the ticket is not the place's any more (moved to another browser)."""
    layout = layout_with_tier(ref.event_id, ref.tier_id)
    placement = heartbeat(
        layout,
        member=ref.entry_id,
        tier_id=ref.tier_id,
        now=now,
        holder=ref.holder,
        lane=ref.lane,
    )
    if placement is not None:
        answer = answer_from_index(
            ref=ref,
            ticket=ticket,
            layout=layout,
            placement=placement,
            throughput=line_reads.throughput(layout),
        )
        if answer is not None:
            return answer
    entry = (
        QueueEntry.objects.filter(pk=ref.entry_id, event_id=ref.event_id)
        .select_related("tier")
        .first()
    )
    if entry is None:
        raise TicketNotFound()
    ticket_holder_check(ref, entry.holder_key)
    return entry_answer(entry, now=now, layout=layout, placement=placement)


async def ticket_poll_async(ref: TicketRef, ticket: str) -> TicketAnswer | None:
    """``ticket_poll`` from the event loop, for a fan in line: from the hot index; while it
    cannot answer (Redis away, the index being rebuilt), from the entry's row and the line's
    snapshot. None otherwise (an admitted fan, a lost index, a short line, PostgreSQL
    unreachable, the event loop's Redis pool spent): callers then take the synchronous way."""
    try:
        layout = await event_layout_async(ref.event_id)
    except DatabaseError:
        return None
    if layout is None or layout.tier_index(ref.tier_id) is None:
        return None
    request = LocateRequest(
        member=ref.entry_id,
        tier_id=ref.tier_id,
        heartbeat_deadline=time.time() + layout.heartbeat_seconds,
        holder=ref.holder,
        lane=ref.lane,
    )
    try:
        placement = await heartbeat_async(layout, request)
    except HotIndexBusy:
        return None  # Django's way records the heartbeat, on its own pool
    if placement is None or placement.counts.state is IndexState.BUILDING:
        return await _answer_from_row(ref, ticket, layout)
    return answer_from_index(
        ref=ref,
        ticket=ticket,
        layout=layout,
        placement=placement,
        throughput=await line_reads.throughput_async(layout),
    )


async def _answer_from_row(ref: TicketRef, ticket: str, layout: EventLayout) -> TicketAnswer | None:
    try:
        row = await entry_row(ref.entry_id)
        if (
            row is None
            or row.event_id != ref.event_id
            or row.tier_id != ref.tier_id
            or row.status not in QUEUED
            or row.holder_key != ref.holder  # moved: Django's way refuses it
            or row.passed_over  # away at their turn: Django's way brings them back
        ):
            return None
        snapshot = await line_snapshot_async(layout)
    except DatabaseError:
        return None
    placed = None
    if row.status == EntryStatus.WAITING:
        if snapshot.waiting <= settings.WR_DEGRADED_EXACT_LINE:
            return None  # counted exactly, in a thread (line_reads.position)
        placed = snapshot.position(layout, tier_id=row.tier_id, order_key=row.order_key)
    return answer_from_snapshot(
        ref=ref,
        ticket=ticket,
        layout=layout,
        status=row.status,
        order_key=row.order_key,
        counts=snapshot.counts(layout),
        placed=placed,
        throughput=await line_reads.throughput_async(layout),
    )
