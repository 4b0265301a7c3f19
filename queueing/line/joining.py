"""Joining the line, one fan or a batch of them in one transaction (group commit), with what a
join needs to know first and why it may be refused.

A join is committed to PostgreSQL with its audit record before the fan is answered. Joins of
one on-sale are serialised by the lock on its audit chain head, so a busy sale start is bound
by how many commits that lock lets through. The lean join path (queueing/web/hot_paths.py)
hands every join that arrives while a batch is committing to the next batch: one transaction,
one lock of the chain head, one chain extension, one round trip to the hot index for all of
them. A single join (the Django view, the waiting page) is a batch of one: there is one copy
of the rules. Should a batch fail, its joins are tried again one by one, so that a failure
is the answer of the join it belongs to only.

A batch of one on-sale goes: refusals of the on-sale itself (not open, closed, maintenance)
and of wrong access codes (each audited as ``rejected``); fans who already hold a ticket get
it back; the newcomers are held to the on-sale's limits (``rules/line_limits.py``: live
places per address, line length, predicted wait), committed, and answered. Each step returns
the answers it settles, by the request's place in the batch; nothing is written into a list
that the steps share.

The on-sale's mode acts in two places: in maintenance, newcomers are refused before anything
is written; in safety net and passthrough, the newcomers the mode lets in are admitted in the
batch's own transaction (``admission.join_admit``) and answered with their pass.

Over 350 lines on purpose: the batch's one transaction, its identity-race fallback and its
answers are one story, best read in one place.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.conf import settings
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)

from events.models import AccessCode, Event, EventMode, EventState, QueueOrder, Tier
from events.validation import access_code_tag, is_well_formed_access_code, normalise_access_code
from queueing.hot.line_index import Placement
from queueing.line.admission import answer_admitted, join_admit, line_length
from queueing.line.answers import TicketAnswer, answer_unplaced, entry_answer, entry_poll
from queueing.line.index_sync import index_add
from queueing.line.reads import layout_with_tier, line_reads
from queueing.line.schedule import line_start
from queueing.models import AuditAction, PassKey, QueueEntry
from queueing.passes.signing import signing_key
from queueing.records.audit import (
    AuditItem,
    audit_append_framed,
    audit_append_many,
    audit_chain_lock,
    audit_frames,
)
from queueing.records.entries import (
    entries_insert,
    entries_return_url_update,
    is_live_identity_conflict,
    order_keys_drawing,
)
from queueing.records.entry_reads import live_entries, live_per_address, unused_places
from queueing.rules.errors import (
    AddressLimited,
    EventClosed,
    EventMaintenance,
    EventNotOpen,
    EventSoldOut,
    InvalidAccessCode,
    PlaceMoved,
    QueueError,
    TicketContention,
)
from queueing.rules.eta import Eta
from queueing.rules.lanes import lane_of
from queueing.rules.layout import EventLayout
from queueing.rules.line_limits import join_quote, within_address_cap
from queueing.rules.shuffle import place_key, place_rank_estimate
from queueing.rules.states import EntryStatus

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class JoinRequest:
    event: Event
    identity: str  # the digest from queueing/web/callers.py
    access_code: str | None
    now: datetime
    # Digest of the client address (queueing/web/callers.py), for
    # max_live_per_address; None for joins that come from no address (never counted).
    address: str | None = None
    # The shop page the fan first asked for, already cleaned (rules/return_urls.py); "" = none.
    return_url: str = ""
    # The join's X-Request-ID (queueing/web/request_ids.py), kept with the entry.
    request_id: str | None = None


@dataclass(frozen=True)
class JoinResult:
    answer: TicketAnswer
    created: bool


# A ticket, a refusal (QueueError), or an unexpected failure of this fan's join (nothing of it
# was committed; the API maps it as for any request: 503 while PostgreSQL is unreachable).
JoinOutcome = JoinResult | Exception
# The outcomes a step settles, by the request's place in its batch.
Answered = dict[int, JoinOutcome]


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
    by_event: dict[int, list[int]] = {}
    for index, request in enumerate(requests):
        by_event.setdefault(request.event.id, []).append(index)
    answered: Answered = {}
    for indexes in by_event.values():
        # Other on-sales' joins in the batch keep their answers whatever this one's do.
        group = _join_group([requests[i] for i in indexes])
        answered.update(zip(indexes, group, strict=True))
        _joins_log([requests[i] for i in indexes], group)
    return _in_order(answered, len(requests))


def _joins_log(requests: Sequence[JoinRequest], outcomes: Sequence[JoinOutcome]) -> None:
    """One line per on-sale's part of a batch (not one per fan: the lean path commits up to
    WR_JOIN_BATCH_MAX joins at once), with the request id of each join that got a ticket:
    the other end of the admission run's line (admission.py)."""
    answered = [
        (request.request_id, outcome.created)
        for request, outcome in zip(requests, outcomes, strict=True)
        if isinstance(outcome, JoinResult)
    ]
    if answered:
        logger.info(
            "joined",
            extra={
                "event_id": requests[0].event.id,
                "count": len(answered),
                "new": sum(created for _, created in answered),
                "request_ids": [request_id for request_id, _ in answered],
            },
        )


# Failures that would be every join's alone too: a refusal of the on-sale itself, or
# PostgreSQL unreachable (joining each fan alone would only wait for it once per fan).
_EVERY_JOINS_FAILURE = (QueueError, OperationalError, InterfaceError)


def _join_group(requests: Sequence[JoinRequest]) -> list[JoinOutcome]:
    """One on-sale's joins, committed together. Should that fail, each joins again on its
    own: one fan's join that fails (a value PostgreSQL refuses, a bug) must fail that fan's
    join only, not the batch it shared with everyone who joined at the same moment."""
    event = requests[0].event
    try:
        batch = _sort(event, requests)
        _wrong_codes_audit(event, batch)
    except Exception as failure:  # noqa: BLE001  answered below
        return _each_alone_after(failure, requests, wrong_codes_audited=False)
    try:
        return _join_sorted(requests, batch)
    except Exception as failure:  # noqa: BLE001  answered below
        # Raised before any of this on-sale's joins committed (once a lane's part committed,
        # a later part's failure is that part's answer: ``_join_sorted``).
        return _each_alone_after(failure, requests, wrong_codes_audited=True)


def _each_alone_after(
    failure: Exception, requests: Sequence[JoinRequest], *, wrong_codes_audited: bool
) -> list[JoinOutcome]:
    if len(requests) == 1 or isinstance(failure, _EVERY_JOINS_FAILURE):
        return [failure] * len(requests)
    logger.warning(
        "a batch of %d joins of event %s failed; each joins alone",
        len(requests),
        requests[0].event.id,
        exc_info=failure,
    )
    outcomes: list[JoinOutcome] = []
    for request in requests:
        try:
            (outcome,) = _join_one_event([request], audit_wrong_codes=not wrong_codes_audited)
        except Exception as alone:  # noqa: BLE001  this fan's answer alone
            outcome = alone
        outcomes.append(outcome)
    return outcomes


def _in_order(answered: Answered, count: int) -> list[JoinOutcome]:
    # Answers are matched to requests by position: a missing one would shift them all.
    assert len(answered) == count and set(answered) == set(range(count)), "a join was unanswered"
    return [answered[index] for index in range(count)]


# ----------------------------------------------------------- before anything is written


def arrival_refusal(
    state: EventState, mode: str = EventMode.QUEUE, *, sold_out: bool = False
) -> QueueError | None:
    """Why nobody new may join an on-sale in this state and mode (None: they may). Fans who
    already hold a live ticket get it back in maintenance: they keep their places. A sale
    that sold out says so rather than "ended": the fan learns there is nothing to wait for."""
    if sold_out:
        return EventSoldOut()
    if state == EventState.SCHEDULED:
        return EventNotOpen()
    if state == EventState.CLOSED:
        return EventClosed()
    if mode == EventMode.MAINTENANCE:
        return EventMaintenance()
    return None


def tiers_for_access_codes(
    event: Event, access_codes: Sequence[str | None]
) -> dict[str | None, Tier | QueueError]:
    """The tier each access code joins (the default tier without one), in two queries at
    most for the whole batch."""
    found: dict[str | None, Tier | QueueError] = {}
    without_code: list[str | None] = []
    with_code: dict[str, list[str]] = {}  # normalised code -> the spellings asked for
    for raw in set(access_codes):
        if raw is None or raw.strip() == "":
            found[raw] = InvalidAccessCode("This on-sale needs an access code.")
            without_code.append(raw)
            continue
        found[raw] = InvalidAccessCode()
        code = normalise_access_code(raw)
        if is_well_formed_access_code(code):
            with_code.setdefault(code, []).append(raw)
    if without_code:
        default = Tier.objects.filter(event=event, is_default=True).first()
        if default is not None:
            found.update((raw, default) for raw in without_code)
    if with_code:
        for access in AccessCode.objects.filter(event=event, code__in=with_code).select_related(
            "tier"
        ):
            found.update((raw, access.tier) for raw in with_code[access.code])
    return found


def arrival_status(event: Event, *, started: bool) -> EntryStatus:
    """On-sales with a start time gather a pre-queue until the line starts (the shuffle)."""
    if event.starts_at is not None and not started:
        return EntryStatus.PREQUEUE
    return EntryStatus.WAITING


def line_started(event_id: int) -> bool:
    """Read again under the chain lock, which the shuffle also takes."""
    return Event.objects.filter(pk=event_id, started_at__isnull=False).exists()


def wrong_codes_audit(*, event_id: int, tried: Sequence[tuple[datetime, str]]) -> None:
    """A ``rejected`` record per wrong code tried (when, the code as typed), with a keyed tag
    of the code, never the code itself (docs/api.md, auditors' ``rejected``).

    In a transaction of its own, before the batch's joins commit: those joins do not hold the
    chain head any longer for it, and only batches with a wrong code pay for it. The
    wrong-code budget per address (queueing/web/abuse.py) bounds how many records one address
    can have written. A rejection changes nothing, so failing to record it does not fail the
    batch's joins."""
    if not tried:
        return
    try:
        with transaction.atomic():
            audit_append_many(
                event_id=event_id,
                actor="fan",
                at=tried[0][0],
                items=[
                    AuditItem(
                        action=AuditAction.REJECTED,
                        at=at,
                        data={"reason": "invalid_access_code", "code_tag": access_code_tag(code)},
                    )
                    for at, code in tried
                ],
            )
    except DatabaseError:
        logger.warning("could not audit %d wrong access codes of event %s", len(tried), event_id)


# ----------------------------------------------------------------- one on-sale's batch


@dataclass
class _Newcomer:
    index: int  # the first request of this identity in the batch
    request: JoinRequest
    tier: Tier
    quote: Eta | None = None
    entry: QueueEntry | None = None
    # The ticket's id, drawn before the entry is built: a random line places and quotes the
    # fan by it.
    ticket_id: uuid.UUID = field(default_factory=uuid.uuid4)
    # A random line's place (its order key), and the ticket whose hash it is when the fan
    # keeps the place an earlier ticket of theirs left unused (``_places_drawn``).
    place: int | None = None
    placed_by: str | None = None
    # Later requests of the same identity in this batch: answered with this fan's ticket.
    repeats: list[int] = field(default_factory=list)
    # The latest non-empty return URL of this fan's requests in the batch.
    return_url: str = ""

    def all_told(self, outcome: JoinOutcome) -> Answered:
        """``outcome`` for each of this fan's requests (a ticket: new for the first only)."""
        if not isinstance(outcome, JoinResult):
            return dict.fromkeys((self.index, *self.repeats), outcome)
        again = JoinResult(answer=outcome.answer, created=False)
        return {self.index: outcome} | dict.fromkeys(self.repeats, again)


@dataclass
class _Sorted:
    """A batch sorted before anything is written: the requests answered already, the ones
    that may join (``open``), and those only a ticket they hold can answer (``held_only``)."""

    answered: Answered
    open: list[int]
    held_only: list[int]
    wrong_codes: list[JoinRequest]
    tiers: Mapping[str | None, Tier | QueueError]


def _sort(event: Event, requests: Sequence[JoinRequest]) -> _Sorted:
    tiers = tiers_for_access_codes(event, [r.access_code for r in requests])
    batch = _Sorted(answered={}, open=[], held_only=[], wrong_codes=[], tiers=tiers)
    for index, request in enumerate(requests):
        refusal = arrival_refusal(
            event.state_at(request.now), event.mode, sold_out=event.sold_out_at is not None
        )
        tier = tiers[request.access_code]
        if isinstance(refusal, EventMaintenance):
            # In maintenance nobody new joins, but a fan who holds a ticket gets it back
            # (whatever code they sent): they keep their place.
            batch.answered[index] = refusal
            batch.held_only.append(index)
        elif refusal is not None:
            batch.answered[index] = refusal
        elif isinstance(tier, QueueError):
            batch.answered[index] = tier
            if request.access_code and request.access_code.strip():
                batch.wrong_codes.append(request)
        else:
            batch.open.append(index)
    return batch


def _wrong_codes_audit(event: Event, batch: _Sorted) -> None:
    wrong_codes_audit(
        event_id=event.id, tried=[(r.now, r.access_code or "") for r in batch.wrong_codes]
    )


def _join_one_event(
    requests: Sequence[JoinRequest], *, audit_wrong_codes: bool = True
) -> list[JoinOutcome]:
    """``requests`` of one on-sale joined together; ``audit_wrong_codes=False`` when a batch
    they belonged to recorded their wrong codes already."""
    batch = _sort(requests[0].event, requests)
    if audit_wrong_codes:
        _wrong_codes_audit(requests[0].event, batch)
    return _join_sorted(requests, batch)


def _join_sorted(requests: Sequence[JoinRequest], batch: _Sorted) -> list[JoinOutcome]:
    event = requests[0].event
    answered = batch.answered
    live = live_entries(event.id, {requests[i].identity for i in batch.open + batch.held_only})
    _keep_latest_return_urls(live, [requests[i] for i in batch.open])
    holders = [i for i in batch.held_only + batch.open if requests[i].identity in live]
    answered |= {i: _told_again(live[requests[i].identity], now=requests[i].now) for i in holders}
    held = set(holders)
    newcomers = _newcomers(requests, [i for i in batch.open if i not in held], batch.tiers)
    if not newcomers:
        return _in_order(answered, len(requests))
    if event.queue_order == QueueOrder.RANDOM:
        _places_drawn(event, newcomers)

    if event.started_at is None:
        event = _started_if_due(event, now=max(n.request.now for n in newcomers))
    layout = layout_with_tier(event.id, *{n.tier.id for n in newcomers})
    status = arrival_status(event, started=event.started_at is not None)
    # The cap is asked before the quotes too, so that a newcomer it refuses takes no place
    # in the counts the others are quoted (or refused queue_full) by; under the lock it is
    # asked again, and has the last word.
    capped, refused = _within_address_cap(event, newcomers)
    answered |= refused
    admitted, refused = _quoted(event, layout, status, capped)
    answered |= refused
    some_committed = False
    placed: list[_Committed] = []  # answered together once every part is in
    for lane, part in _by_lane(event, admitted):
        try:
            committed = _commit(event, status, part, lane=lane)
        except IntegrityError as exc:
            if not is_live_identity_conflict(exc):
                if not some_committed:
                    raise
                answered |= _told_failure(part, exc)
                continue
            answered |= _after_identity_conflict(part)
        except Exception as failure:  # this lane's part alone (see below)
            if not some_committed:
                raise  # nothing committed yet: the group's own answer (``_join_group``)
            # Another lane's part committed already and its fans have their answers: the
            # fans of this part alone hear of the failure (and join again on their retry).
            answered |= _told_failure(part, failure)
        else:
            some_committed = True
            answered |= committed.refused
            if committed.placed:
                placed.append(committed)
    if placed:
        answered |= _answer_newcomers(layout, placed)
    return _in_order(answered, len(requests))


def _told_failure(part: Sequence[_Newcomer], failure: Exception) -> Answered:
    told: Answered = {}
    for newcomer in part:
        told |= newcomer.all_told(failure)
    return told


def _started_if_due(event: Event, *, now: datetime) -> Event:
    """The on-sale as it is once its line started, when the start is due (no schedule, or
    ``starts_at`` passed) and no tick has made it yet: the beat comes once a second, and the
    newcomers of the first second must not queue for it (safety net and passthrough admit
    in the join only once the line started, ``admission.admission_open``).

    Only with nobody in the pre-queue. A pre-queue's start is its shuffle, which moves the
    whole cohort and rebuilds the hot index: the tick's work, not a request's. Until it has
    run, newcomers join the pre-queue and are shuffled with it (``_commit`` decides that
    under the lock the shuffle takes): the boundary between the cohort and those behind it
    is the shuffle itself, not the clock."""
    if event.state_at(now) not in (EventState.OPEN, EventState.PAUSED):
        return event
    line_start(event_id=event.id, now=now, only_without_prequeue=True)
    # Started by this join, another, or a tick meanwhile; or still waiting for its shuffle.
    return Event.objects.filter(pk=event.id).first() or event


def _newcomers(
    requests: Sequence[JoinRequest],
    indexes: Sequence[int],
    tiers: Mapping[str | None, Tier | QueueError],
) -> list[_Newcomer]:
    """One newcomer per identity among ``indexes``, its later requests as repeats."""
    found: dict[str, _Newcomer] = {}
    for index in indexes:
        request = requests[index]
        newcomer = found.get(request.identity)
        if newcomer is not None:
            newcomer.repeats.append(index)
            newcomer.return_url = request.return_url or newcomer.return_url
            continue
        tier = tiers[request.access_code]
        assert isinstance(tier, Tier)
        found[request.identity] = _Newcomer(
            index=index, request=request, tier=tier, return_url=request.return_url
        )
    return list(found.values())


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
    event: Event, newcomers: Sequence[_Newcomer]
) -> tuple[list[_Newcomer], Answered]:
    """The newcomers the on-sale's ``max_live_per_address`` lets in, and the refusals of the
    others. Its last word is said under the chain head's lock, which every join of the
    on-sale takes, so the cap holds across processes too."""
    if not event.max_live_per_address:
        return list(newcomers), {}
    addresses = [newcomer.request.address for newcomer in newcomers]
    allowed = within_address_cap(
        addresses,
        held=live_per_address(event.id, {a for a in addresses if a is not None}),
        cap=event.max_live_per_address,
    )
    refusal = AddressLimited(retry_after=settings.WR_ADDRESS_LIMIT_RETRY_AFTER)
    refused: Answered = {}
    for newcomer, ok in zip(newcomers, allowed, strict=True):
        if not ok:
            refused |= newcomer.all_told(refusal)
    return [n for n, ok in zip(newcomers, allowed, strict=True) if ok], refused


def _places_drawn(event: Event, newcomers: Sequence[_Newcomer]) -> None:
    """Each newcomer's place in a random line: the keyed hash of the seed and their ticket
    (rules/shuffle.py), or, when their latest ticket of this on-sale ended without being let
    in (they left, their hold ran out, staff removed it), that ticket's place. Leaving and
    joining again re-rolls nothing; a fan who had their turn is placed afresh. Their joined
    record names the ticket the place is the hash of (``placed_by``), which an auditor checks
    (docs/api.md, "Random order")."""
    unused = unused_places(event.id, {n.request.identity for n in newcomers})
    for newcomer in newcomers:
        kept = unused.get(newcomer.request.identity)
        if kept is None:
            newcomer.place = place_key(event.shuffle_seed, newcomer.ticket_id)
        else:
            newcomer.place, newcomer.placed_by = kept.order_key, kept.placed_by


def _ranks_in_tier(
    layout: EventLayout, counts: Sequence[int], newcomers: Sequence[_Newcomer]
) -> list[int] | None:
    """In a random line, how many fans of each newcomer's tier hold a lower place: those
    waiting (counted by the hot index, else expected from the place, rules/shuffle.py) and
    the batch's other newcomers. None in a line in join order (each joins the back)."""
    if any(n.place is None for n in newcomers):
        return None
    places = [(n.tier.id, n.place or 0) for n in newcomers]
    below = line_reads.fans_below(layout, places)
    if below is None:
        tier_count = dict(zip((t.id for t in layout.tiers), counts, strict=False))
        below = [place_rank_estimate(place, tier_count.get(t, 0)) for t, place in places]
    return [
        waiting + sum(1 for other in places if other[0] == tier_id and other[1] < place)
        for waiting, (tier_id, place) in zip(below, places, strict=True)
    ]


def _quoted(
    event: Event, layout: EventLayout, status: EntryStatus, newcomers: Sequence[_Newcomer]
) -> tuple[list[_Newcomer], Answered]:
    """Quote every newcomer's wait and refuse those the line has no room for, as if they had
    joined one after the other in the batch's order; in a random line, each at their place."""
    limited = bool(event.max_queue_length or event.max_wait_seconds)
    if (not limited and status != EntryStatus.WAITING) or event.mode == EventMode.PASSTHROUGH:
        # Passthrough: newcomers go straight in, past a line they never stand in.
        return list(newcomers), {}
    # Checked against the line as it is now: exact for one batch; concurrent batches racing
    # past a limit can overshoot it by at most their size.
    counts = line_reads.counts(layout)
    throughput = line_reads.throughput(layout)
    waiting = status == EntryStatus.WAITING
    ranks = _ranks_in_tier(layout, counts.tiers, newcomers) if waiting else None
    added_per_tier = [0] * len(layout.tiers)
    admitted: list[_Newcomer] = []
    refused: Answered = {}
    for number, newcomer in enumerate(newcomers):
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
                rank_in_tier=None if ranks is None else ranks[number],
            )
        except QueueError as refusal:
            refused |= newcomer.all_told(refusal)
            continue
        added_per_tier[layout.tier_index(newcomer.tier.id) or 0] += 1
        admitted.append(newcomer)
    return admitted, refused


@dataclass(frozen=True)
class _Committed:
    event: Event  # as read under the chain head's lock
    status: EntryStatus  # the status the newcomers joined with
    placed: list[_Newcomer]  # the others were refused under the lock
    refused: Answered = field(default_factory=dict)
    admitted_ids: frozenset[int] = frozenset()  # let in by the join itself (the mode)


def _entry(event: Event, status: EntryStatus, newcomer: _Newcomer, lane: int) -> QueueEntry:
    entry = QueueEntry(
        public_id=newcomer.ticket_id,
        lane=lane,
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
        join_request_id=newcomer.request.request_id,
    )
    if newcomer.place is not None:
        # A random line's place, fixed before the quote (``_places_drawn``): joining again
        # returns this ticket, so nobody re-rolls it (rules/shuffle.py).
        entry.order_key = newcomer.place
    return entry


def _nothing_to_decide(event: Event) -> bool:
    """Whether a batch's newcomers are all placed, and as waiting, whatever commits before
    it: the on-sale queues (no mode to read again), caps no address, and its line started
    (``started_at`` is never unset). Their entries can then be inserted before the chain
    head's lock is taken. (One identity joining by both paths at once, at the moment staff
    switch the mode or the cap, or re-entering while joining anew, can make two transactions
    wait for each other: one for the head, the other for the identity's unique entry.
    PostgreSQL ends one of them, and its fans are answered ``unavailable`` and retry.)"""
    return (
        event.mode == EventMode.QUEUE
        and not event.max_live_per_address
        and (event.starts_at is None or event.started_at is not None)
    )


def _decided_on_sale_wide(event: Event) -> bool:
    """Whether a part of a laned on-sale's join decides something for the whole on-sale, and
    so takes the root chain's head after its lane's: the mode (read again; safety net and
    passthrough admit on the root chain) or the address cap (counted over every lane). Not
    the pre-queue: the start takes every lane's head before the root's, so a lane's head
    alone orders its joins against the shuffle."""
    return event.mode != EventMode.QUEUE or bool(event.max_live_per_address)


def _by_lane(event: Event, newcomers: Sequence[_Newcomer]) -> list[tuple[int, list[_Newcomer]]]:
    """The batch split by the newcomers' lanes (queueing/rules/lanes.py), in lane order: each
    part commits on its own under its lane's chain head, so that joins to different lanes
    commit in parallel across the web processes. A line of one lane is one part."""
    lanes = max(1, event.lanes)
    parts: dict[int, list[_Newcomer]] = {}
    for newcomer in newcomers:
        parts.setdefault(lane_of(newcomer.request.identity, lanes=lanes), []).append(newcomer)
    return sorted(parts.items(), key=lambda part: part[0])


def _commit(
    event: Event, status: EntryStatus, newcomers: Sequence[_Newcomer], *, lane: int
) -> _Committed:
    """One lane's part of the batch, in one transaction. Its entry rows and joined records
    are built first, and the chain head's lock, which every join of the on-sale's lane waits
    for, is held only for what must be decided in the chain's order: the records' seq and
    links, and, when the on-sale has something to decide under it (``_nothing_to_decide``),
    the mode, the address cap, pre-queue or waiting, and the insert. Order keys need no chain
    lock: they are drawn under the on-sale's order-key lock (records/entries.py), whatever
    the path.

    In a line of several lanes, what is decided for the on-sale as a whole (the mode read
    again, the address cap counted over every lane, the admissions of safety net and
    passthrough, which belong to the root chain) is decided under the root chain's head too,
    taken after the lane's, as the start takes them (lanes first, then the root); the
    pre-queue's joins need only their lane's (``_decided_on_sale_wide``)."""
    laned = event.lanes > 1
    built = [_entry(event, status, newcomer, lane) for newcomer in newcomers]
    frames = audit_frames(
        event_id=event.id,
        actor="fan",
        at=newcomers[0].request.now,
        lane=lane if laned else None,
        items=[
            AuditItem(
                action=AuditAction.JOINED,
                at=newcomer.request.now,
                ticket_id=entry.public_id,
                data={
                    "tier": newcomer.tier.name,
                    "order_key": None,  # drawn by the insert
                    "status": status,
                    "quote": newcomer.quote.as_dict() if newcomer.quote else None,
                }
                | ({"placed_by": newcomer.placed_by} if newcomer.placed_by else {}),
            )
            for newcomer, entry in zip(newcomers, built, strict=True)
        ],
    )
    prepared = {
        id(newcomer): (entry, frame)
        for newcomer, entry, frame in zip(newcomers, built, frames, strict=True)
    }
    early = _nothing_to_decide(event)
    with transaction.atomic():
        if _lanes_held(event.id) != event.lanes:
            # Staff changed the lanes of a line nobody had joined yet, since this batch read
            # them: each join is tried again alone, with the on-sale read afresh.
            raise TicketContention("The on-sale's lanes changed; please retry.")
        order_keys_drawing(event.id)  # before the chain head's lock, always
        if early:
            entries_insert(built, checked_now=True)
        head = audit_chain_lock(event_id=event.id, lane=lane if laned else None)
        placed: Sequence[_Newcomer] = newcomers
        refused: Answered = {}
        root_head = head
        if not early:
            if laned and _decided_on_sale_wide(event):
                root_head = audit_chain_lock(event_id=event.id)
            if event.mode != EventMode.QUEUE:
                # The mode as of this lock, which staff's changes take too (their audit
                # record): no join is let in by a mode after the record of staff leaving it.
                event = Event.objects.get(pk=event.id)
                if event.mode == EventMode.MAINTENANCE:
                    for newcomer in newcomers:
                        refused |= newcomer.all_told(EventMaintenance())
                    return _Committed(event=event, status=status, placed=[], refused=refused)
            placed, refused = _within_address_cap(event, newcomers)
            if not placed:
                return _Committed(event=event, status=status, placed=[], refused=refused)
            # Decided again under the lock that the shuffle also takes: the boundary between
            # the shuffled cohort and those queued behind it is the shuffle itself, not each
            # request's clock reading (which could put a later arrival inside the cohort).
            if event.starts_at is not None:
                status = arrival_status(event, started=line_started(event.id))
            for newcomer in placed:
                prepared[id(newcomer)][0].status = status
            entries_insert([prepared[id(newcomer)][0] for newcomer in placed])
        entries = [prepared[id(newcomer)][0] for newcomer in placed]
        placed_frames = []
        for newcomer, entry in zip(placed, entries, strict=True):
            newcomer.entry = entry
            frame = prepared[id(newcomer)][1]
            frame.data["order_key"], frame.data["status"] = entry.order_key, status
            placed_frames.append(frame)
        audit_append_framed(
            event_id=event.id,
            actor="fan",
            frames=placed_frames,
            locked_head=head,
            lane=lane if laned else None,
        )
        let_in = []
        if status == EntryStatus.WAITING and not early:
            let_in = join_admit(
                event=event,
                entries=entries,
                now=max(newcomer.request.now for newcomer in placed),
                head=root_head,
            )
    return _Committed(
        event=event,
        status=status,
        placed=list(placed),
        refused=refused,
        admitted_ids=frozenset(entry.id for entry in let_in),
    )


def _lanes_held(event_id: int) -> int:
    """The on-sale's number of lanes, read with a key-share lock on its row until the join
    commits: staff's change of it (which locks the row for update, then refuses once anyone
    is in line: staff/services.py) waits for this join, or this join for the change, so no
    fan's lane is drawn from a count that is not the line's. Taken before the chain head's
    lock, in the order staff's change takes the two."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT lanes FROM {Event._meta.db_table} WHERE id = %s FOR KEY SHARE", [event_id]
        )
        row = cursor.fetchone()
    return int(row[0]) if row is not None else 1


def _told_again(entry: QueueEntry, *, now: datetime) -> JoinOutcome:
    """The identity's live ticket, told again; PlaceMoved once the place was moved to
    another browser (line/place_links.py): the identity's own no longer holds it, and its
    new ticket is that browser's alone."""
    if entry.holder_key:
        return PlaceMoved()
    return JoinResult(answer=entry_poll(entry, now=now), created=False)


def _after_identity_conflict(newcomers: Sequence[_Newcomer]) -> Answered:
    """Another process committed a join of one of these identities first (the transaction
    was rolled back). Alone, the fan is answered with that ticket; in a batch, every fan
    joins again on their own, so that only the one who raced is affected."""
    answered: Answered = {}
    for newcomer in newcomers:
        request = replace(newcomer.request, return_url=newcomer.return_url)
        outcome: JoinOutcome
        if len(newcomers) > 1:
            try:
                outcome = _join_one_event([request])[0]
            except Exception as failure:  # noqa: BLE001  this fan's alone (see entry_join_many)
                outcome = failure
        else:
            live = live_entries(request.event.id, {request.identity})
            _keep_latest_return_urls(live, [request])
            existing = live.get(request.identity)
            outcome = (
                _told_again(existing, now=request.now)
                if existing is not None
                else TicketContention("Another request changed this ticket; please retry.")
            )
        answered |= newcomer.all_told(outcome)
    return answered


def _answer_newcomers(layout: EventLayout, parts: Sequence[_Committed]) -> Answered:
    """The answers of every part committed from one batch. Their fans go into the hot index
    together (one round trip, and in a line of lanes one count of them in every other lane,
    index_sync.index_add), not part by part."""
    placements: dict[int, Placement] = {}
    for status in dict.fromkeys(part.status for part in parts):
        # Those a join let in are not in line: the hot index never lists them.
        in_line = [
            newcomer.entry
            for part in parts
            if part.status == status
            for newcomer in part.placed
            if newcomer.entry is not None and newcomer.entry.id not in part.admitted_ids
        ]
        if in_line:
            added = index_add(
                layout,
                in_line,
                add="pre" if status == EntryStatus.PREQUEUE else "tier",
                heartbeat_deadline=max(e.joined_at for e in in_line).timestamp()
                + layout.heartbeat_seconds,
            )
            placements |= {entry.id: p for entry, p in zip(in_line, added, strict=True) if p}
    answered: Answered = {}
    for part in parts:
        answered |= _answer_part(layout, part, placements)
    return answered


def _answer_part(
    layout: EventLayout, committed: _Committed, placements: dict[int, Placement]
) -> Answered:
    entries = [newcomer.entry for newcomer in committed.placed if newcomer.entry is not None]
    once: tuple[int, PassKey] | None = None  # for the answers of those let in, read once
    answered: Answered = {}
    for newcomer, entry in zip(committed.placed, entries, strict=True):
        now = newcomer.request.now
        placement = placements.get(entry.id)
        try:
            if entry.id in committed.admitted_ids:
                if once is None:
                    part_placements = [placements[e.id] for e in entries if e.id in placements]
                    once = (line_length(layout, part_placements), signing_key(now=now))
                answer = answer_admitted(
                    entry,
                    event=committed.event,
                    layout=layout,
                    queue_length=once[0],
                    now=now,
                    key=once[1],
                )
            else:
                answer = entry_answer(entry, now=now, layout=layout, placement=placement)
        except DatabaseError:
            # Committed: the fan must get their ticket even if describing it failed; their
            # first status poll gives the position (or the pass).
            logger.warning("join of entry %s committed; answering without its position", entry.id)
            answer = answer_unplaced(entry, layout=layout, placement=placement)
        answered |= newcomer.all_told(JoinResult(answer=answer, created=True))
    return answered
