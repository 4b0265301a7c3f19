"""Letting fans in as they join: the on-sale modes that admit in the join itself.

Called in the join's transaction, under the audit chain head's lock, right after the
newcomers were inserted as ``waiting`` and their ``joined`` records appended. Those it lets in
move to ``admitted`` by the same compare-and-set as the admission run's, with the same
``admitted`` audit record, in the same transaction: the join's answer then carries the pass.

- ``passthrough``: every newcomer, past capacity and pace. Nothing is counted before, so no
  lock is taken; the admissions still count afterwards (``active``, the 60-second window).
- ``safety_net``: while nobody of the on-sale is in line (waiting or in the pre-queue), the
  first newcomers of the batch, as many as ``admission_room`` allows: the admission run's own
  rule, asked under the admission run's own lock, and spending the pace's credit as the run
  does. The lock is only tried: when a run holds it, the newcomers queue and that run or the
  next lets them in. The chain head's lock (every join of the on-sale takes it) orders the
  joins among themselves, so two joins never both see "nobody in line" or both take the last
  place; the admission lock orders them against the runs, which count ``active`` and the
  window only once they hold it.

Both only while the pace would let anyone in at all (``admission_open``: open, not paused,
the line started).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime, timedelta

from django.db import connection

from events.models import Event, EventMode
from queueing.hot.line_index import IndexState, Placement
from queueing.line.admission import (
    admission_lock_try,
    admission_open,
    admission_room,
    admission_spend,
    not_before_last_run,
)
from queueing.line.reads import current_counts
from queueing.line.sessions import entry_pass
from queueing.line.views import TicketView, ticket_view
from queueing.models import AdmissionState, AuditAction, AuditChainHead, PassKey, QueueEntry
from queueing.records.audit import AuditItem, audit_append_many
from queueing.records.transitions import transition_many
from queueing.rules.layout import EventLayout
from queueing.rules.states import QUEUED, EntryStatus
from queueing.rules.ticket_codec import TicketRef, ticket_issue

ADMITTING_MODES = (EventMode.SAFETY_NET, EventMode.PASSTHROUGH)


def join_admit(
    *, event: Event, entries: Sequence[QueueEntry], now: datetime, head: AuditChainHead
) -> list[QueueEntry]:
    """Admit those of ``entries`` (just inserted as waiting, in join order) the on-sale's
    mode lets in at once; the admitted entries, updated in place (status, times, pass
    handed over). ``event`` must have been read under the chain head's lock."""
    if event.mode not in ADMITTING_MODES or not entries or not admission_open(event, now):
        return []
    if event.mode == EventMode.PASSTHROUGH:
        return _admit(event, entries, now=now, head=head)
    ids = [entry.id for entry in entries]
    if QueueEntry.objects.filter(event_id=event.pk, status__in=QUEUED).exclude(pk__in=ids).exists():
        return []  # someone is in line already: newcomers queue behind them
    if not admission_lock_try(event.pk):
        return []  # a run is letting fans in right now: it or the next one takes these
    state, _ = AdmissionState.objects.get_or_create(event_id=event.pk)
    now = not_before_last_run(now, state)
    room = admission_room(event, state, now=now, batch_limit=len(entries))
    admitted = _admit(event, entries[: room.n], now=now, head=head) if room.n > 0 else []
    admission_spend(state, event, room, now=now, admitted=len(admitted))
    # Only what this bookkeeping owns: a run's after-commit clears index_pending by itself.
    state.save(update_fields=["tokens", "refilled_at", "recent_counts"])
    return admitted


def _admit(
    event: Event, entries: Sequence[QueueEntry], *, now: datetime, head: AuditChainHead
) -> list[QueueEntry]:
    pass_expires_at = now + timedelta(seconds=event.session_seconds)
    moved = transition_many(
        ids=[entry.id for entry in entries],
        to=EntryStatus.ADMITTED,
        expected=[EntryStatus.WAITING],
        now=now,
        extra={"admitted_at": now, "pass_expires_at": pass_expires_at},
    )
    moved_ids = {m.id for m in moved}
    admitted = [entry for entry in entries if entry.id in moved_ids]
    if not admitted:
        return []
    return_urls = _pass_handed_over(moved_ids, now=now)
    for entry in admitted:
        entry.return_url = return_urls[entry.id]
        entry.status = EntryStatus.ADMITTED
        entry.status_changed_at = entry.admitted_at = entry.pass_issued_at = now
        entry.pass_expires_at = pass_expires_at
    audit_append_many(
        event_id=event.pk,
        actor="system:admission",
        at=now,
        locked_head=head,
        items=[
            AuditItem(
                action=AuditAction.ADMITTED,
                ticket_id=entry.public_id,
                data={"tier": entry.tier.name, "order_key": entry.order_key, "mode": event.mode},
            )
            for entry in admitted
        ],
    )
    return admitted


def line_length(layout: EventLayout, placements: Iterable[Placement]) -> int:
    """The line's length for the answers of fans let in by a join: from a placement of the
    same batch when there is one, else read (once for the batch)."""
    for placement in placements:
        if placement.counts.state is IndexState.READY:
            return placement.counts.queue_length
    return current_counts(layout).queue_length


def admitted_answer(
    entry: QueueEntry,
    *,
    event: Event,
    layout: EventLayout,
    queue_length: int,
    now: datetime,
    key: PassKey,
) -> TicketView:
    """The answer of a fan let in by their join: admitted, with the pass and where to take
    it, exactly as the ticket endpoint hands them over (``entry_pass``); ``key`` signs it
    (read once for the batch: a read per pass cost more than the signature)."""
    return ticket_view(
        ticket_issue(TicketRef(entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id)),
        layout,
        EntryStatus.ADMITTED,
        None,
        queue_length,
        throughput=None,
        tier_id=entry.tier_id,
        order_key=None,
        issued=entry_pass(entry, event=event, now=now, key=key),
    )


def _pass_handed_over(ids: Collection[int], *, now: datetime) -> dict[int, str]:
    """Record that the join's answer hands the pass over (that claims the slot, as a first
    poll would); each entry's return URL, which the insert may have left to the database's
    default and the pass's redirect needs."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {QueueEntry._meta.db_table} SET pass_issued_at = %s "
            "WHERE id = ANY(%s) RETURNING id, return_url",
            [now, list(ids)],
        )
        return dict(cursor.fetchall())
