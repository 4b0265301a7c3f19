"""A fan goes back in line after a shop session that ended without completing (their pass
expired, or the session was abandoned): once per ticket, within the on-sale's
``reentry_seconds``, at the front of their tier (queueing/rules/states.py).

The entry goes back to ``waiting``, not straight to ``admitted``: admission alone decides
who goes in (capacity, pace, tiers, heartbeats), and it is asked to run at once after the
commit, so a returning fan with room in the shop waits about as long as one admission run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils.translation import gettext_noop

from events.models import Event
from queueing.line.answers import TicketAnswer, entry_answer, reentry_facts
from queueing.line.followups import admission_soon
from queueing.line.index_sync import index_add, index_holder_moved
from queueing.line.reads import layout_with_tier
from queueing.models import AuditAction, QueueEntry
from queueing.records.audit import AuditItem, audit_append_many, audit_chain_lock
from queueing.records.entries import Reentered, entry_reenter_cas, is_live_identity_conflict
from queueing.records.entry_reads import (
    FIRST_ADMITTED_AT,
    live_entries,
    live_per_address,
    tier_smallest_waiting_key,
)
from queueing.rules.errors import ReentryNotAllowed, TicketNotFound
from queueing.rules.line_limits import within_address_cap
from queueing.rules.place_links import ticket_holder_check
from queueing.rules.states import front_order_key, reentry_refusal
from queueing.rules.ticket_codec import TicketRef

# Marked for translation (the page says them in the fan's language); the API says them as is.
ANOTHER_PLACE = gettext_noop(
    "You already hold another place in this line; go on with that one (leave it first to "
    "come back with this ticket)."
)
ADDRESS_FULL = gettext_noop(
    "Too many places in this line are already held from your network address."
)


def _entry(ref: TicketRef) -> QueueEntry:
    entry = QueueEntry.objects.filter(pk=ref.entry_id, event_id=ref.event_id).first()
    if entry is None:
        raise TicketNotFound()
    ticket_holder_check(ref, entry.holder_key)  # a moved place's old ticket acts on nothing
    return entry


def entry_reenter(*, ref: TicketRef, now: datetime) -> TicketAnswer:
    """Put the fan back in line and describe their ticket; ReentryNotAllowed says why not."""
    try:
        with transaction.atomic():
            # Every join, shuffle and re-entry of the on-sale takes this lock: under it the
            # entry, the front of the tier and the fan's other places are read as they are,
            # and two re-entries of one ticket (two tabs, a double click) go one after the
            # other, so the second finds the first done.
            head = audit_chain_lock(event_id=ref.event_id)
            entry = _entry(ref)
            event = Event.objects.get(pk=ref.event_id)
            refusal = reentry_refusal(reentry_facts(entry, event, now=now), now=now)
            if refusal is not None:
                raise ReentryNotAllowed(refusal)
            _refuse_another_place(entry, event)
            assert entry.admitted_at is not None and entry.ended_at is not None
            order_key = front_order_key(
                entry.order_key,
                tier_smallest_waiting_key(event_id=event.id, tier_id=entry.tier_id),
            )
            back = entry_reenter_cas(
                entry_id=entry.id,
                order_key=order_key,
                ended_after=now - timedelta(seconds=event.reentry_seconds),
                now=now,
            )
            if back is None:  # the conditions above, asked again by the UPDATE itself
                raise ReentryNotAllowed(
                    gettext_noop("This ticket changed meanwhile; look at it again.")
                )
            audit_append_many(
                event_id=event.id,
                actor="fan",
                at=now,
                locked_head=head,
                items=[
                    AuditItem(
                        action=AuditAction.REENTERED,
                        ticket_id=back.public_id,
                        data={
                            "from": entry.status,
                            "order_key": order_key,
                            "previous_order_key": entry.order_key,
                            # The earlier session, cleared from the entry while it waits
                            # again: the trail keeps it (and the rate window reads it).
                            FIRST_ADMITTED_AT: entry.admitted_at.isoformat(),
                            "ended_at": entry.ended_at.isoformat(),
                        },
                    )
                ],
            )
            # Robust: with the broker down the fan still waits at the front; the tick admits.
            transaction.on_commit(lambda: admission_soon(event.id), robust=True)
    except IntegrityError as exc:
        # A join of the same identity committed between our check and our UPDATE cannot
        # happen under the lock, but the database has the last word: never a 500 for it.
        if is_live_identity_conflict(exc):
            raise ReentryNotAllowed(ANOTHER_PLACE) from exc
        raise
    return _answer(back, event_id=event.id, now=now)


def _refuse_another_place(entry: QueueEntry, event: Event) -> None:
    """The fan's identity may hold one live ticket, and their address no more than the
    on-sale's ``max_live_per_address``: coming back is taking a place again."""
    if live_entries(event.id, {entry.identity}):
        raise ReentryNotAllowed(ANOTHER_PLACE)
    if event.max_live_per_address and entry.address is not None:
        held = live_per_address(event.id, {entry.address})
        (allowed,) = within_address_cap([entry.address], held=held, cap=event.max_live_per_address)
        if not allowed:
            raise ReentryNotAllowed(ADDRESS_FULL)


def _answer(back: Reentered, *, event_id: int, now: datetime) -> TicketAnswer:
    """After the commit: the hot index learns the returning fan (as a join's does: their
    heartbeat starts now), and they are told where they stand."""
    layout = layout_with_tier(event_id, back.tier_id)
    (placement,) = index_add(
        layout, [back], add="tier", heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds
    )
    # Read again: a fast admission run may have let them in already.
    entry = QueueEntry.objects.select_related("tier").get(pk=back.id)
    if entry.holder_key:  # a moved place: its hint left the index with it (locate.lua)
        index_holder_moved(event_id, entry.id, entry.holder_key, lane=entry.lane)
    return entry_answer(entry, now=now, layout=layout, placement=placement)
