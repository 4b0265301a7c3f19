"""What a fan is told about a ticket, built from facts already at hand. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from queueing.hot.line_index import IndexState, LineCounts, Placement, Where
from queueing.models import QueueEntry
from queueing.rules.eta import Eta, Throughput, estimate_wait
from queueing.rules.layout import EventLayout
from queueing.rules.polling import poll_after_seconds
from queueing.rules.positions import SketchedPosition, position_in_line
from queueing.rules.states import EntryStatus
from queueing.rules.ticket_codec import TicketRef, ticket_issue


@dataclass(frozen=True)
class IssuedPass:
    """What an admitted fan is handed: the pass, and where to take it."""

    token: str
    expires_at: datetime
    redirect_url: str


@dataclass(frozen=True)
class TicketView:
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
    # line until then (queueing/rules/reentry.py); None otherwise.
    reentry_until: datetime | None = None
    # The ticket's last session was in the shop (its end is told apart from a lapsed place).
    was_admitted: bool = False
    # Staff's word to the line, or None (from the on-sale's cached layout).
    message: str | None = None
    # The position was placed between two checkpoints of a snapshot of the line (the hot
    # index could not answer), not counted: it is near, not exact.
    approximate: bool = False


def entry_view_unplaced(
    entry: QueueEntry, *, layout: EventLayout, placement: Placement | None
) -> TicketView:
    """An entry described without any further read (what a join can still answer when
    PostgreSQL or Redis failed right after its commit): its ticket and status."""
    counts = placement.counts if placement is not None else None
    return ticket_view(
        ticket_issue(TicketRef(entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id)),
        layout,
        EntryStatus(entry.status),
        None,
        counts.queue_length if counts is not None and counts.state is IndexState.READY else 0,
        throughput=None,
        tier_id=entry.tier_id,
        order_key=entry.order_key,
    )


def ticket_view(
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
) -> TicketView:
    """A fan's answer from what is known of their entry and the line; ``degraded``: known
    without the hot index (the fan is asked to come back later)."""
    # While staff hold the line nobody knows when it moves again: no wait rather than one
    # that leaves the pause out.
    eta = None
    if position is not None and not layout.paused:
        eta = estimate_wait(position, throughput, tier_id)
    return TicketView(
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
    )


def position_in_tier_queue(layout: EventLayout, tier_id: int, placement: Placement) -> int | None:
    """The fan's place in the whole line, when the index found them in their tier's queue."""
    if placement.where is not Where.TIER or placement.rank is None:
        return None
    return position_in_line(
        layout, tier_id=tier_id, rank_in_tier=placement.rank, tier_counts=placement.counts.tiers
    )


def hot_ticket_view(
    *,
    ref: TicketRef,
    ticket: str,
    layout: EventLayout,
    placement: Placement,
    throughput: Throughput | None,
) -> TicketView | None:
    """What the hot index alone can tell a fan in line (waiting or in the pre-queue); None
    when it cannot answer (not there, being rebuilt): then the database must be read.
    Pure, so that the lean ASGI status path and ``ticket_poll`` share it."""
    if placement.counts.state is not IndexState.READY:
        return None
    position = position_in_tier_queue(layout, ref.tier_id, placement)
    if position is not None:
        status = EntryStatus.WAITING
    elif placement.where is Where.PREQUEUE:
        position, status = None, EntryStatus.PREQUEUE
    else:
        return None
    return ticket_view(
        ticket,
        layout,
        status,
        position,
        placement.counts.queue_length,
        throughput=throughput,
        tier_id=ref.tier_id,
        order_key=placement.order_key,
    )


def degraded_ticket_view(
    *,
    ref: TicketRef,
    ticket: str,
    layout: EventLayout,
    status: EntryStatus,
    order_key: int,
    counts: LineCounts,
    placed: SketchedPosition | None,
    throughput: Throughput | None,
) -> TicketView:
    """A fan in line (waiting or in the pre-queue) told where they stand without the hot
    index: from the line's counts and, while waiting, the position placed from a snapshot
    (or counted: ``placed.exact``). Pure, shared by the lean path and ``ticket_poll``."""
    position = placed.position if placed is not None and status == EntryStatus.WAITING else None
    return ticket_view(
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
