"""Joining the line, one fan or a batch of them in one transaction (group commit).

A join is committed to PostgreSQL with its audit record before the fan is answered. Joins of
one on-sale are serialised by the lock on its audit chain head, so a busy sale start is bound
by how many commits that lock lets through. The lean join path (queueing/web/hot_paths.py) hands
every join that arrives while a batch is committing to the next batch: one transaction, one
lock of the chain head, one chain extension, one round trip to the hot index for all of them.
A single join (the Django view, the waiting page) is a batch of one: there is one copy of the
rules.

The on-sale's mode acts in two places: in maintenance, newcomers are refused before anything
is written; in safety net and passthrough, the newcomers the mode lets in are admitted in the
batch's own transaction (join_admission.py) and answered with their pass.

Over 400 lines on purpose: the batch's one transaction, its identity-race fallback
and its answers are one story, best read in one place (the reads before the commit are in
join_inputs.py, the refusal rules in rules/admission_control.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction

from events.models import Event, EventMode, Tier
from queueing.hot.client import HotIndexUnavailable
from queueing.hot.line_index import Placement
from queueing.line.index_sync import index_add
from queueing.line.join_admission import admitted_answer, join_admit, line_length
from queueing.line.join_inputs import (
    arrival_refusal,
    arrival_status,
    line_started,
    live_entries,
    live_per_address,
    tiers_for_access_codes,
)
from queueing.line.reads import current_counts
from queueing.line.rejections import wrong_codes_audit
from queueing.line.status import entry_answer, entry_poll, layout_with_tier
from queueing.line.throughput import current_throughput
from queueing.line.views import TicketView, entry_view_unplaced
from queueing.models import AuditAction, PassKey, QueueEntry
from queueing.passes.signing import signing_key
from queueing.records.audit import AuditItem, audit_append_many, audit_chain_lock
from queueing.records.entries import (
    entries_insert,
    entries_return_url_update,
    is_live_identity_conflict,
)
from queueing.rules.errors import (
    AddressLimited,
    EventMaintenance,
    QueueError,
    TicketContention,
)
from queueing.rules.eta import Eta
from queueing.rules.layout import EventLayout
from queueing.rules.line_limits import join_quote, within_address_cap
from queueing.rules.states import EntryStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JoinRequest:
    event: Event
    identity: str  # the digest from queueing/web/identity.py
    access_code: str | None
    now: datetime
    # Digest of the client address (queueing/web/abuse.py), for max_live_per_address; None
    # for joins that come from no address (they are never counted against one).
    address: str | None = None
    # The shop page the fan first asked for, already cleaned (rules/return_urls.py); "" = none.
    return_url: str = ""


@dataclass(frozen=True)
class JoinResult:
    view: TicketView
    created: bool


# A ticket, a refusal (QueueError), or an unexpected failure of this fan's join (nothing of it
# was committed; the API maps it as for any request: 503 while PostgreSQL is unreachable).
JoinOutcome = JoinResult | Exception


def entry_join(
    *,
    event: Event,
    identity: str,
    access_code: str | None,
    now: datetime,
    address: str | None = None,
) -> JoinResult:
    (outcome,) = entry_join_many(
        [
            JoinRequest(
                event=event, identity=identity, access_code=access_code, now=now, address=address
            )
        ]
    )
    if not isinstance(outcome, JoinResult):
        raise outcome
    return outcome


def entry_join_many(requests: Sequence[JoinRequest]) -> list[JoinOutcome]:
    """Every request's ticket (or its refusal), in the order given. Joins of one on-sale
    are committed together; their order keys follow the order of ``requests``."""
    outcomes: list[JoinOutcome | None] = [None] * len(requests)
    by_event: dict[int, list[int]] = {}
    for index, request in enumerate(requests):
        by_event.setdefault(request.event.id, []).append(index)
    for indexes in by_event.values():
        group: list[JoinOutcome]
        try:
            group = _join_one_event([requests[i] for i in indexes])
        except Exception as failure:  # noqa: BLE001
            # Raised before this on-sale's joins committed (after it, nothing raises): a
            # refusal of the on-sale itself, or PostgreSQL gone. Other on-sales' joins in
            # the batch keep their answers.
            group = [failure] * len(indexes)
        for index, outcome in zip(indexes, group, strict=True):
            outcomes[index] = outcome
    return _all_answered(outcomes)


def _all_answered(outcomes: list[JoinOutcome | None]) -> list[JoinOutcome]:
    # Answers are matched to requests by position: a missing one would shift them all.
    assert all(outcome is not None for outcome in outcomes), "a join was left unanswered"
    return [outcome for outcome in outcomes if outcome is not None]


@dataclass
class _Newcomer:
    request: JoinRequest
    tier: Tier
    quote: Eta | None = None
    entry: QueueEntry | None = None
    # Later requests of the same identity in this batch: answered with this fan's ticket.
    repeats: list[int] = field(default_factory=list)
    # The latest non-empty return URL of this fan's requests in the batch.
    return_url: str = ""


def _join_one_event(requests: Sequence[JoinRequest]) -> list[JoinOutcome]:
    event = requests[0].event
    outcomes: list[JoinOutcome | None] = [None] * len(requests)
    tiers = tiers_for_access_codes(event, [r.access_code for r in requests])
    open_indexes = []
    wrong_codes = []
    # In maintenance nobody new joins, but a fan who holds a ticket gets it back (whatever
    # code they sent): they keep their place.
    held_only = []
    for index, request in enumerate(requests):
        refusal = arrival_refusal(event.state_at(request.now), event.mode)
        tier = tiers[request.access_code]
        if isinstance(refusal, EventMaintenance):
            outcomes[index] = refusal
            held_only.append(index)
        elif refusal is not None:
            outcomes[index] = refusal
        elif isinstance(tier, QueueError):
            outcomes[index] = tier
            if request.access_code and request.access_code.strip():
                wrong_codes.append(request)
        else:
            open_indexes.append(index)
    if wrong_codes:
        wrong_codes_audit(
            event_id=event.id, tried=[(r.now, r.access_code or "") for r in wrong_codes]
        )
    live = live_entries(event.id, {requests[i].identity for i in open_indexes + held_only})
    _keep_latest_return_urls(live, [requests[i] for i in open_indexes])
    for index in held_only:
        request = requests[index]
        if request.identity in live:
            outcomes[index] = JoinResult(
                view=entry_poll(live[request.identity], now=request.now), created=False
            )
    newcomers: dict[str, tuple[int, _Newcomer]] = {}
    for index in open_indexes:
        request = requests[index]
        if request.identity in live:
            outcomes[index] = JoinResult(
                view=entry_poll(live[request.identity], now=request.now), created=False
            )
        elif request.identity in newcomers:
            newcomer = newcomers[request.identity][1]
            newcomer.repeats.append(index)
            newcomer.return_url = request.return_url or newcomer.return_url
        else:
            tier = tiers[request.access_code]
            assert isinstance(tier, Tier)
            newcomers[request.identity] = (
                index,
                _Newcomer(request=request, tier=tier, return_url=request.return_url),
            )
    if not newcomers:
        return _all_answered(outcomes)

    layout = layout_with_tier(event.id, *{n.tier.id for _, n in newcomers.values()})
    status = arrival_status(event, started=event.started_at is not None)
    # The cap is asked before the quotes too, so that a newcomer it refuses takes no place
    # in the counts the others are quoted (or refused queue_full) by; under the lock it is
    # asked again, and has the last word.
    capped = _within_address_cap(event, list(newcomers.values()), outcomes)
    admitted = _admit_to_line(event, layout, status, capped, outcomes)
    if admitted:
        try:
            committed = _commit(event, status, admitted, outcomes)
        except IntegrityError as exc:
            if not is_live_identity_conflict(exc):
                raise
            _after_identity_conflict(admitted, outcomes)
        else:
            if committed.placed:
                _answer_newcomers(layout, committed, outcomes)
    return _all_answered(outcomes)


def _keep_latest_return_urls(live: dict[str, QueueEntry], requests: Sequence[JoinRequest]) -> None:
    """A fan who joins again while holding a live ticket keeps it; the latest non-empty return
    URL they bring replaces the one kept with it (they asked for another page since), in the
    database and in ``live`` before it is described."""
    latest: dict[int, str] = {}
    for request in requests:
        entry = live.get(request.identity)
        if entry is not None and request.return_url:
            latest[entry.id] = request.return_url
    changed = {
        entry.id: latest[entry.id]
        for entry in live.values()
        if entry.id in latest and latest[entry.id] != entry.return_url
    }
    entries_return_url_update(changed)
    for entry in live.values():
        if entry.id in changed:
            entry.return_url = changed[entry.id]


def _within_address_cap(
    event: Event,
    admitted: Sequence[tuple[int, _Newcomer]],
    outcomes: list[JoinOutcome | None],
) -> list[tuple[int, _Newcomer]]:
    """The newcomers the on-sale's ``max_live_per_address`` lets in; the others are refused
    in ``outcomes``. Its last word is said under the chain head's lock, which every join of
    the on-sale takes, so the cap holds across processes too."""
    if not event.max_live_per_address:
        return list(admitted)
    addresses = [newcomer.request.address for _, newcomer in admitted]
    allowed = within_address_cap(
        addresses,
        held=live_per_address(event.id, {a for a in addresses if a is not None}),
        cap=event.max_live_per_address,
    )
    for (index, newcomer), ok in zip(admitted, allowed, strict=True):
        if not ok:
            refusal = AddressLimited(retry_after=settings.WR_ADDRESS_LIMIT_RETRY_AFTER)
            for position in (index, *newcomer.repeats):
                outcomes[position] = refusal
    return [pair for pair, ok in zip(admitted, allowed, strict=True) if ok]


def _after_identity_conflict(
    admitted: Sequence[tuple[int, _Newcomer]], outcomes: list[JoinOutcome | None]
) -> None:
    """Another process committed a join of one of these identities first (the transaction
    was rolled back). Alone, the fan is answered with that ticket; in a batch, every fan
    joins again on their own, so that only the one who raced is affected."""
    for index, newcomer in admitted:
        request = replace(newcomer.request, return_url=newcomer.return_url)
        outcome: JoinOutcome
        if len(admitted) > 1:
            try:
                outcome = _join_one_event([request])[0]
            except Exception as failure:  # noqa: BLE001  this fan's alone (see entry_join_many)
                outcome = failure
        else:
            live = live_entries(request.event.id, {request.identity})
            _keep_latest_return_urls(live, [request])
            existing = live.get(request.identity)
            outcome = (
                JoinResult(view=entry_poll(existing, now=request.now), created=False)
                if existing is not None
                else TicketContention("Another request changed this ticket; please retry.")
            )
        outcomes[index] = outcome
        for repeat in newcomer.repeats:
            outcomes[repeat] = (
                JoinResult(view=outcome.view, created=False)
                if isinstance(outcome, JoinResult)
                else outcome
            )


def _admit_to_line(
    event: Event,
    layout: EventLayout,
    status: EntryStatus,
    newcomers: Sequence[tuple[int, _Newcomer]],
    outcomes: list[JoinOutcome | None],
) -> list[tuple[int, _Newcomer]]:
    """Quote every newcomer's wait and refuse those the line has no room for, as if they had
    joined one after the other in the batch's order."""
    limited = bool(event.max_queue_length or event.max_wait_seconds)
    if (not limited and status != EntryStatus.WAITING) or event.mode == EventMode.PASSTHROUGH:
        # Passthrough: newcomers go straight in, past a line they never stand in.
        return list(newcomers)
    # Checked against the line as it is now: exact for one batch; concurrent batches racing
    # past a limit can overshoot it by at most their size.
    counts = current_counts(layout)
    throughput = current_throughput(layout)
    added_per_tier = [0] * len(layout.tiers)
    admitted = []
    for index, newcomer in newcomers:
        try:
            newcomer.quote = join_quote(
                layout,
                tier_id=newcomer.tier.id,
                waiting=status == EntryStatus.WAITING,
                queue_length=counts.queue_length + sum(added_per_tier),
                tier_counts=[
                    (counts.tiers[i] if i < len(counts.tiers) else 0) + added_per_tier[i]
                    for i in range(len(layout.tiers))
                ],
                throughput=throughput,
                max_queue_length=event.max_queue_length,
                max_wait_seconds=event.max_wait_seconds,
                full_retry_after=settings.WR_QUEUE_FULL_RETRY_AFTER,
            )
        except QueueError as refusal:
            for position in (index, *newcomer.repeats):
                outcomes[position] = refusal
            continue
        tier_index = layout.tier_index(newcomer.tier.id) or 0
        added_per_tier[tier_index] += 1
        admitted.append((index, newcomer))
    return admitted


@dataclass(frozen=True)
class _Committed:
    event: Event  # as read under the chain head's lock
    status: EntryStatus  # the status the newcomers joined with
    placed: list[tuple[int, _Newcomer]]  # the others were refused in the outcomes
    admitted_ids: frozenset[int] = frozenset()  # let in by the join itself (the mode)


def _commit(
    event: Event,
    status: EntryStatus,
    admitted: Sequence[tuple[int, _Newcomer]],
    outcomes: list[JoinOutcome | None],
) -> _Committed:
    with transaction.atomic():
        # Under the chain head's lock, order keys are drawn in commit order: no fan can
        # become visible to admission after someone who joined behind them.
        head = audit_chain_lock(event_id=event.id)
        if event.mode != EventMode.QUEUE:
            # The mode as of this lock, which staff's changes take too (their audit record):
            # no join is let in by a mode after the record of staff leaving it.
            event = Event.objects.get(pk=event.id)
            if event.mode == EventMode.MAINTENANCE:
                for index, newcomer in admitted:
                    for position in (index, *newcomer.repeats):
                        outcomes[position] = EventMaintenance()
                return _Committed(event=event, status=status, placed=[])
        admitted = _within_address_cap(event, admitted, outcomes)
        if not admitted:
            return _Committed(event=event, status=status, placed=[])
        # Decided again under the lock that the shuffle also takes: the boundary between the
        # shuffled cohort and those queued behind it is the shuffle itself, not each
        # request's clock reading (which could put a later arrival inside the cohort).
        if event.starts_at is not None:
            status = arrival_status(event, started=line_started(event.id))
        entries = [
            QueueEntry(
                event=event,
                tier=newcomer.tier,
                identity=newcomer.request.identity,
                address=newcomer.request.address,
                status=status,
                joined_at=newcomer.request.now,
                status_changed_at=newcomer.request.now,
                quoted_p10=newcomer.quote.p10 if newcomer.quote else None,
                quoted_p50=newcomer.quote.p50 if newcomer.quote else None,
                quoted_p90=newcomer.quote.p90 if newcomer.quote else None,
                return_url=newcomer.return_url,
            )
            for _, newcomer in admitted
        ]
        entries_insert(entries)
        for (_, newcomer), entry in zip(admitted, entries, strict=True):
            newcomer.entry = entry
        audit_append_many(
            event_id=event.id,
            actor="fan",
            at=admitted[0][1].request.now,
            locked_head=head,
            items=[
                AuditItem(
                    action=AuditAction.JOINED,
                    at=newcomer.request.now,
                    ticket_id=entry.public_id,
                    data={
                        "tier": newcomer.tier.name,
                        "order_key": entry.order_key,
                        "status": status,
                        "quote": newcomer.quote.as_dict() if newcomer.quote else None,
                    },
                )
                for (_, newcomer), entry in zip(admitted, entries, strict=True)
            ],
        )
        let_in = []
        if status == EntryStatus.WAITING:
            let_in = join_admit(
                event=event,
                entries=entries,
                now=max(newcomer.request.now for _, newcomer in admitted),
                head=head,
            )
    return _Committed(
        event=event,
        status=status,
        placed=list(admitted),
        admitted_ids=frozenset(entry.id for entry in let_in),
    )


def _answer_newcomers(
    layout: EventLayout, committed: _Committed, outcomes: list[JoinOutcome | None]
) -> None:
    entries = [newcomer.entry for _, newcomer in committed.placed if newcomer.entry is not None]
    # Those the join let in are not in line: the hot index never lists them.
    in_line = [entry for entry in entries if entry.id not in committed.admitted_ids]
    placements: dict[int, Placement] = {}
    if in_line:
        added = index_add(
            layout,
            in_line,
            add="pre" if committed.status == EntryStatus.PREQUEUE else "tier",
            heartbeat_deadline=max(e.joined_at for e in in_line).timestamp()
            + layout.heartbeat_seconds,
        )
        placements = {entry.id: p for entry, p in zip(in_line, added, strict=True) if p}
    once: tuple[int, PassKey] | None = None  # for the answers of those let in, read once
    for (index, newcomer), entry in zip(committed.placed, entries, strict=True):
        now = newcomer.request.now
        placement = placements.get(entry.id)
        try:
            if entry.id in committed.admitted_ids:
                if once is None:
                    once = (line_length(layout, placements.values()), signing_key(now=now))
                view = admitted_answer(
                    entry,
                    event=committed.event,
                    layout=layout,
                    queue_length=once[0],
                    now=now,
                    key=once[1],
                )
            else:
                view = entry_answer(entry, now=now, layout=layout, placement=placement)
        except (DatabaseError, HotIndexUnavailable):
            # Committed: the fan must get their ticket even if describing it failed; their
            # first status poll gives the position (or the pass).
            logger.warning("join of entry %s committed; answering without its position", entry.id)
            view = entry_view_unplaced(entry, layout=layout, placement=placement)
        outcomes[index] = JoinResult(view=view, created=True)
        for repeat in newcomer.repeats:
            outcomes[repeat] = JoinResult(view=view, created=False)
