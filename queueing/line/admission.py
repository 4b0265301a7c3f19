"""Letting fans in: by the admission run (each tick, and when a slot frees), and in the join
itself for the modes that admit newcomers at once. PostgreSQL first, one admission per event
at a time.

**The run.** ``n = min(capacity - active, rate credit, rate-window room, batch limit)``, the
rate credit earned by the time elapsed since the last run (``rules/admission_plan.py``). It
goes in three steps: *plan* (the lock, the on-sale, its state and mode, how many may go in:
``admission_room``), *move* (the next ``n`` picked per tier in (priority, order key) order with
``FOR UPDATE SKIP LOCKED``, the unseen expired instead, the rest moved to ``admitted`` by
compare-and-set), *record* (the audit records, the pace's credit spent and the counts behind
the measured pace, in the same transaction). The hot index is updated after the commit. A
transaction-scoped advisory lock makes a second, concurrent run (two beats, a slot-freed
trigger) skip instead of double-admitting; a killed worker's transaction simply rolls back.

The on-sale's mode changes what a run may do: in ``maintenance`` nobody is let in; in
``passthrough`` the run lets the line in at the batch limit, past capacity and pace.

**In the join** (``join_admit``), called in the join's transaction, under the audit chain
head's lock, right after the newcomers were inserted as ``waiting`` and their ``joined``
records appended. Those it lets in move to ``admitted`` by the run's compare-and-set, with
the same ``admitted`` audit record, in the same transaction: the join's answer then carries
the pass.

- ``passthrough``: every newcomer, past capacity and pace. Nothing is counted before, so no
  lock is taken; the admissions still count afterwards (``active``, the 60-second window).
- ``safety_net``: while nobody of the on-sale is in line (waiting or in the pre-queue), the
  first newcomers of the batch, as many as ``admission_room`` allows: the run's own rule,
  asked under the run's own lock, and spending the pace's credit as the run does. The lock
  is only tried: when a run holds it, the newcomers queue and that run or the next lets them
  in. The chain head's lock (every join of the on-sale takes it) orders the joins among
  themselves, so two joins never both see "nobody in line" or both take the last place; the
  admission lock orders them against the runs, which count ``active`` and the window only
  once they hold it.

Both only while the pace would let anyone in at all (``admission_open``: open, not paused,
the line started).

Over 350 lines on purpose: the run and the join share their rules (``admission_room``,
``admission_spend``) and their lock, and read best side by side.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from events.models import Event, EventMode, EventState, QueueOrder, Tier
from queueing.hot.channels import notify_admitted
from queueing.hot.line_index import IndexState, Placement
from queueing.line.answers import TicketAnswer, answer_from_facts
from queueing.line.away import passed_over
from queueing.line.index_sync import index_admitted_count, index_forget, pace_record
from queueing.line.reads import event_layout, line_reads
from queueing.line.sessions import entry_pass
from queueing.line.turn_mail import turn_mail_ask
from queueing.models import AdmissionState, AuditAction, AuditChainHead, PassKey, QueueEntry
from queueing.records.audit import AuditItem, audit_append_many
from queueing.records.entries import Settled, order_keys_settled
from queueing.records.entry_reads import IN_ORDER, earlier_admissions_since
from queueing.records.transitions import Moved, transition_many
from queueing.rules.admission_plan import (
    RATE_WINDOW_SECONDS,
    TierDemand,
    TokenBucket,
    batch_size,
    bucket_refill,
    split_batch,
)
from queueing.rules.eta import (
    PACE_WINDOW_SECONDS,
    admissions_record,
    departures_record,
    measure_throughput,
)
from queueing.rules.layout import EventLayout, service_groups
from queueing.rules.states import QUEUED, EntryStatus
from queueing.rules.ticket_codec import TicketRef, ticket_issue

logger = logging.getLogger(__name__)

# First key of the two-int advisory lock; the second is the event id.
ADMISSION_LOCK_NAMESPACE = 0x5752
INDEX_SYNC_GRACE_SECONDS = 10.0
# How often a run picks again for the picks it lost to away fans (each round one query per
# tier short): enough for a front of the line that is mostly away, bounded all the same.
PICK_ROUNDS = 4


# ------------------------------------------------------ what the run and the join share


@dataclass(frozen=True)
class AdmissionOutcome:
    admitted: tuple[Moved, ...] = ()
    expired: tuple[Moved, ...] = ()
    skipped: str | None = None


def admission_lock_try(event_id: int) -> bool:
    """Take the on-sale's admission lock for the rest of the transaction; False when another
    transaction holds it (a run, or a join admitting in safety net), without waiting."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(%s, %s)", [ADMISSION_LOCK_NAMESPACE, event_id]
        )
        return bool(cursor.fetchone()[0])


def admission_open(event: Event, now: datetime) -> bool:
    """Whether fans may be let in by the pace now: the on-sale is open (not paused, not
    before its start or after its end), its line has started, and it is not in
    maintenance."""
    return (
        event.state_at(now) == EventState.OPEN
        and event.started_at is not None
        and event.mode != EventMode.MAINTENANCE
    )


def not_before_last_run(now: datetime, state: AdmissionState) -> datetime:
    """``now``, or the state's latest clock reading if that is later: a caller with an older
    reading (a slow tick loop, a join racing a tick) never runs in the past, or the bucket
    and the 60-second window could be fooled."""
    readings = [t for t in (state.last_run_at, state.refilled_at) if t is not None]
    return max([now, *readings])


@dataclass(frozen=True)
class AdmissionRoom:
    """How many may be let in now, and the pace's credit as of now (before spending)."""

    n: int
    bucket: TokenBucket
    active: int | None = None  # fans in the shop, when the capacity was counted


def _inside(event_id: int) -> int:
    """Fans in the shop now: admitted, their session not yet ended."""
    return QueueEntry.objects.filter(event_id=event_id, status=EntryStatus.ADMITTED).count()


def admission_room(
    event: Event,
    state: AdmissionState,
    *,
    now: datetime,
    batch_limit: int,
    within_capacity: bool = True,
    paced: bool = True,
) -> AdmissionRoom:
    """``n = min(capacity - active, rate credit, rate-window room, batch limit)``; to be
    asked under the admission lock, so that what it counts cannot change before the
    admissions it allows are committed. ``within_capacity``/``paced`` False leave out that
    limit (passthrough; a manual admission is outside the pace)."""
    active = 0
    counted = within_capacity and bool(event.capacity)
    if counted:
        active = _inside(event.pk)
    bucket = TokenBucket(state.tokens, state.refilled_at)
    in_window = 0
    if event.rate_per_minute:
        bucket = bucket_refill(
            bucket,
            rate_per_minute=event.rate_per_minute,
            burst_seconds=settings.WR_ADMISSION_BURST_SECONDS,
            now=now,
        )
        if paced:
            window_start = now - timedelta(seconds=RATE_WINDOW_SECONDS)
            in_window = QueueEntry.objects.filter(
                event_id=event.pk, admitted_at__gt=window_start
            ).count() + earlier_admissions_since(event_id=event.pk, since=window_start)
    n = batch_size(
        capacity=event.capacity if within_capacity else 0,
        active=active,
        rate_per_minute=event.rate_per_minute if paced else 0,
        tokens=bucket.tokens,
        admitted_in_window=in_window,
        batch_limit=batch_limit,
    )
    return AdmissionRoom(n=n, bucket=bucket, active=active if counted else None)


def admission_spend(
    state: AdmissionState,
    event: Event,
    room: AdmissionRoom,
    *,
    now: datetime,
    admitted: int,
    spends_credit: bool = True,
    by_tier: Mapping[int, int] | None = None,
) -> None:
    """The bookkeeping of ``admitted`` fans let in at ``now`` (the caller saves ``state``):
    the pace's credit spent, and the counts behind the measured throughput (``by_tier``: how
    many of them from each tier, when known)."""
    # Without a rate there is no bucket to drain (no debt when a rate is set later); a
    # manual admission is outside the pace and leaves the bucket as it was.
    if not event.rate_per_minute:
        state.tokens = 0.0
    elif spends_credit:
        state.tokens = max(0.0, room.bucket.tokens - admitted)
    state.refilled_at = room.bucket.refilled_at
    state.recent_counts = admissions_record(
        state.recent_counts, second=int(now.timestamp()), admitted=admitted
    )
    _count_departures(state, active=room.active, now=now, admitted=admitted)
    if by_tier is not None:
        _count_tiers(state, by_tier, now=now)


def _count_tiers(state: AdmissionState, by_tier: Mapping[int, int], *, now: datetime) -> None:
    """Admissions per second per tier, kept as long as the pace reads them (a minute)."""
    counts = {}
    for key in {*state.recent_tier_counts, *(str(tier) for tier in by_tier)}:
        kept = admissions_record(
            state.recent_tier_counts.get(key, []),
            second=int(now.timestamp()),
            admitted=by_tier.get(int(key), 0),
            window=PACE_WINDOW_SECONDS,
        )
        if kept:
            counts[key] = kept
    state.recent_tier_counts = counts


def _count_departures(
    state: AdmissionState, *, active: int | None, now: datetime, admitted: int
) -> None:
    """Who left the shop since the previous run (those inside then, less those inside now)
    and who is inside after this one: the time in the shop behind a capacity-bound pace."""
    if active is None:
        state.active_after = None
        return
    second = int(now.timestamp())
    left = max(0, state.active_after - active) if state.active_after is not None else 0
    inside = active + admitted
    # Only the last minute is kept (what rules/eta.py reads): the row the run saves stays small.
    state.recent_departures = departures_record(
        state.recent_departures, second=second, left=left, inside=inside
    )
    state.active_after = inside


def _shop_watch(event: Event, state: AdmissionState, *, now: datetime) -> None:
    """While staff hold the line the shop keeps checking fans out: its departures are
    recorded as an admitting run's are. Otherwise the first run after the pause would count
    everyone who left during it against the inside-seconds of a shop that stayed as full
    as before it, a shop that seemed to slow down, and quote the line far too long."""
    if not event.capacity or state.active_after is None:
        return
    _count_departures(state, active=_inside(event.pk), now=now, admitted=0)
    state.save(update_fields=["recent_departures", "active_after"])


# ------------------------------------------------------------------- the run


@dataclass(frozen=True)
class ManualAdmission:
    """Staff letting ``count`` fans in at once: the rate is bypassed, the capacity never."""

    count: int
    actor: str


@dataclass(frozen=True)
class _Plan:
    """What a run decided under its lock, before anyone moves."""

    event: Event
    state: AdmissionState
    now: datetime  # never before the state's last clock reading
    room: AdmissionRoom
    heal_index: bool  # a previous run committed but never reached the hot index
    manual: ManualAdmission | None


@dataclass(frozen=True)
class _Moves:
    admitted: list[Moved] = field(default_factory=list)
    expired: list[Moved] = field(default_factory=list)
    passed: list[Moved] = field(default_factory=list)  # away: passed over, place kept
    tier_names: dict[int, str] = field(default_factory=dict)
    # A random line's run: the settled entry id it took fans up to (kept in each admitted
    # record, so the fairness report knows whom each admission had to be ahead of).
    settled_id: int | None = None


def admission_run(
    *, event_id: int, now: datetime, manual: ManualAdmission | None = None
) -> AdmissionOutcome:
    # Before the run's transaction: no fan beyond the keys settled now is taken, so nobody
    # whose join is still committing can be passed by (records/entries.py).
    settled = order_keys_settled(event_id)
    with transaction.atomic():
        plan = _plan(event_id, now=now, manual=manual)
        if isinstance(plan, AdmissionOutcome):
            return plan
        moves = _move(plan, settled=settled)
        _record(plan, moves)
    _after_admission(
        plan.event,
        plan.state,
        moves.admitted,
        [*moves.expired, *moves.passed],
        heal_index=plan.heal_index,
        now=plan.now,
    )
    if moves.admitted:
        _admissions_log(event_id, moves.admitted, manual=manual)
    return AdmissionOutcome(admitted=tuple(moves.admitted), expired=tuple(moves.expired))


def _admissions_log(
    event_id: int, admitted: Sequence[Moved], *, manual: ManualAdmission | None
) -> None:
    """One line per run that let anyone in (not one per fan: a run admits up to
    WR_ADMISSION_BATCH), naming each ticket with the request id of the join that made it,
    so that a fan's way is followed from nginx's log to this worker's."""
    logger.info(
        "admitted",
        extra={
            "event_id": event_id,
            "count": len(admitted),
            "by": manual.actor if manual else "system:admission",
            "admitted": [
                {"ticket": str(moved.public_id), "join_request_id": moved.join_request_id}
                for moved in admitted
            ],
        },
    )


def _plan(
    event_id: int, *, now: datetime, manual: ManualAdmission | None
) -> _Plan | AdmissionOutcome:
    """Under the on-sale's admission lock (held until the transaction ends): the run's plan,
    or why it lets nobody in."""
    if not admission_lock_try(event_id):
        return AdmissionOutcome(skipped="busy")
    event = Event.objects.filter(pk=event_id).first()
    if event is None:
        return AdmissionOutcome(skipped="missing")
    state, _ = AdmissionState.objects.get_or_create(event_id=event_id)
    now = not_before_last_run(now, state)
    # The previous run committed but its index update never finished (its worker died),
    # judged after a grace period so that a healthy overlapping run is not mistaken.
    heal_index = state.index_pending and (
        state.last_run_at is None
        or (now - state.last_run_at).total_seconds() > INDEX_SYNC_GRACE_SECONDS
    )
    if event.mode == EventMode.MAINTENANCE:
        # Staff's "admit N now" too: the shop behind is down for maintenance.
        return AdmissionOutcome(skipped="maintenance")
    held = event.state_at(now) == EventState.PAUSED and event.started_at is not None
    # Staff may also let fans in by hand while the on-sale is paused.
    paused_by_hand = manual is not None and held
    if not (admission_open(event, now) or paused_by_hand):
        if held:
            _shop_watch(event, state, now=now)
        return AdmissionOutcome(skipped="not_open")
    # Passthrough lets the line in as fast as the batches go: those who waited when staff
    # switched go in within a few ticks, as newcomers do at once.
    passthrough = event.mode == EventMode.PASSTHROUGH and manual is None
    room = admission_room(
        event,
        state,
        now=now,
        batch_limit=manual.count if manual else settings.WR_ADMISSION_BATCH,
        within_capacity=not passthrough,
        paced=not (manual or passthrough),
    )
    return _Plan(event=event, state=state, now=now, room=room, heal_index=heal_index, manual=manual)


def _move(plan: _Plan, *, settled: Settled) -> _Moves:
    """The next ``room.n`` fans over the tiers (their split, ``rules/admission_plan.py``):
    those whose page is away are passed over (their place kept, line/away.py), those whose
    hold ran out too expire, the others are admitted; the picks are refilled for those
    passed by, so that away fans do not slow the line down. Nobody with an order key beyond
    ``settled`` is taken."""
    event, state, now, n = plan.event, plan.state, plan.now, plan.room.n
    if n <= 0:
        return _Moves()
    # Place keys are hashes, not drawn in join order: a join still committing may sort before
    # anyone, and no bound on keys keeps it from being passed by. What holds is that every
    # entry up to the settled id is committed, and each pick takes the lowest place among
    # them: the claim the fairness report checks (docs/api.md, "Random order").
    bound = (
        _Bound(entry_id=settled.entry_id)
        if event.queue_order == QueueOrder.RANDOM
        else _Bound(order_key=settled.order_key)
    )
    tiers = list(Tier.objects.filter(event_id=event.pk).order_by("priority", "id"))
    split = split_batch(
        [TierDemand(t.id, t.share, _waiting_at_most(event.pk, t.id, n, bound)) for t in tiers],
        n,
        {int(k): v for k, v in state.tier_credit.items()},
    )
    wanted = {tier_id: take for tier_id, take in split.take.items() if take}
    admitted: list[Moved] = []
    expired: list[Moved] = []
    passed: list[Moved] = []
    for _ in range(PICK_ROUNDS):
        picked = {
            tier_id: _pick(event.pk, tier_id, take, bound) for tier_id, take in wanted.items()
        }
        lanes = {entry_id: lane for pairs in picked.values() for entry_id, lane in pairs}
        candidates = [entry_id for pairs in picked.values() for entry_id, _ in pairs]
        if not candidates:
            break
        # An abandoned tab never takes a shop slot (line/reads.py decides whom the index saw).
        unseen = line_reads.unseen_among(event, candidates, now, lanes=lanes)
        expired += transition_many(
            ids=[i for i in candidates if i in unseen.gone],
            to=EntryStatus.EXPIRED,
            expected=[EntryStatus.WAITING],
            now=now,
        )
        passed += passed_over(ids=[i for i in candidates if i in unseen.away], now=now)
        let_in = transition_many(
            ids=[i for i in candidates if i not in unseen.away and i not in unseen.gone],
            to=EntryStatus.ADMITTED,
            expected=[EntryStatus.WAITING],
            now=now,
            extra={
                "admitted_at": now,
                "pass_expires_at": now + timedelta(seconds=event.session_seconds),
            },
        )
        admitted += let_in
        # Picked again: only the tiers that lost picks to the unseen, and had more to give.
        let_in_by_tier = Counter(moved.tier_id for moved in let_in)
        wanted = {
            tier_id: take - let_in_by_tier[tier_id]
            for tier_id, take in wanted.items()
            if len(picked[tier_id]) == take and let_in_by_tier[tier_id] < take
        }
        if not wanted:
            break
    service_rank = {tier.id: rank for rank, tier in enumerate(tiers)}
    admitted.sort(key=lambda moved: (service_rank[moved.tier_id], moved.order_key))
    state.tier_credit = {str(k): v for k, v in split.credit.items()}
    return _Moves(
        admitted=admitted,
        expired=expired,
        passed=passed,
        tier_names={tier.id: tier.name for tier in tiers},
        settled_id=bound.entry_id,
    )


@dataclass(frozen=True)
class _Bound:
    """Whom a run may take: keys up to the settled one (fifo), or ids up to the settled one
    (random, whose keys are not drawn in order)."""

    order_key: int | None = None
    entry_id: int | None = None

    def sql(self) -> tuple[str, list[int]]:
        if self.entry_id is not None:
            return "AND id <= %s ", [self.entry_id]
        return "AND order_key <= %s ", [self.order_key or 0]


def _waiting_at_most(event_id: int, tier_id: int, limit: int, bound: _Bound) -> int:
    """How many wait in a tier, in its order (not those passed over while away) and within
    the run's bound, counting no further than ``limit`` (cheap in a huge line)."""
    within, params = bound.sql()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {QueueEntry._meta.db_table} "
            "WHERE event_id = %s AND tier_id = %s AND status = %s "
            f"AND passed_over_at IS NULL {within}LIMIT %s) AS head",
            [event_id, tier_id, EntryStatus.WAITING.value, *params, limit],
        )
        return int(cursor.fetchone()[0])


def _pick(event_id: int, tier_id: int, limit: int, bound: _Bound) -> list[tuple[int, int]]:
    """The next ``limit`` fans of a tier, as (entry id, lane), in order-key order across
    every lane of the line: one read of the partial index behind the line's order, which
    holds all lanes, is the merge of the lanes' heads. Only within ``bound``: in fifo, a
    join that drew a smaller key may still be committing (records/entries.py)."""
    in_line = QueueEntry.objects.filter(IN_ORDER, event_id=event_id, tier_id=tier_id)
    if bound.entry_id is not None:
        in_line = in_line.filter(id__lte=bound.entry_id)
    else:
        in_line = in_line.filter(order_key__lte=bound.order_key)
    return list(
        in_line.order_by("order_key")
        .select_for_update(skip_locked=True)
        .values_list("id", "lane")[:limit]
    )


def _record(plan: _Plan, moves: _Moves) -> None:
    """In the run's transaction: the audit records of who moved, the pace's credit spent,
    the counts behind the measured pace, and the run's own clock."""
    event, state, now, manual = plan.event, plan.state, plan.now, plan.manual
    audit_append_many(
        event_id=event.pk,
        actor=manual.actor if manual else "system:admission",
        at=now,
        items=[
            AuditItem(
                action=AuditAction.ADMITTED,
                ticket_id=moved.public_id,
                data={
                    "tier": moves.tier_names[moved.tier_id],
                    "order_key": moved.order_key,
                    **({"settled_id": moves.settled_id} if moves.settled_id is not None else {}),
                },
            )
            for moved in moves.admitted
        ]
        + [
            AuditItem(
                action=AuditAction.EXPIRED,
                ticket_id=moved.public_id,
                data={"reason": "no_heartbeat", "from": moved.previous},
            )
            for moved in moves.expired
        ]
        + [
            AuditItem(
                action=AuditAction.AWAY,
                ticket_id=moved.public_id,
                data={
                    "tier": moves.tier_names[moved.tier_id],
                    "order_key": moved.order_key,
                    "kept_until": (now + timedelta(seconds=event.away_seconds)).isoformat(),
                },
            )
            for moved in moves.passed
        ],
    )
    # Passthrough's admissions spend the credit too (down to none): back in queue or
    # safety net, the pace starts from an empty bucket.
    admission_spend(
        state,
        event,
        plan.room,
        now=now,
        admitted=len(moves.admitted),
        spends_credit=manual is None,
        by_tier=Counter(moved.tier_id for moved in moves.admitted),
    )
    state.last_run_at = now
    state.index_pending = bool(moves.admitted or moves.expired or moves.passed)
    state.save()


def _after_admission(
    event: Event,
    state: AdmissionState,
    admitted: Sequence[Moved],
    unseen: Sequence[Moved],
    *,
    heal_index: bool,
    now: datetime,
) -> None:
    """After the commit: the hot index drops those who left the line (``unseen``: expired,
    or passed over while away), the admitted fans' pages hear it, mails go out, and the
    pace measured so far is written for everyone's quotes."""
    if heal_index:
        # A previous run committed but never reached the hot index (its worker died).
        Event.objects.filter(pk=event.pk).update(hot_index_dirty=True)
    # Mails need PostgreSQL and the broker, not the hot index: asked for whatever Redis says.
    turn_mail_ask(m.id for m in admitted)
    moved = [*admitted, *unseen]
    if not index_forget(event.pk, moved):
        return
    index_admitted_count(event.pk, admitted, lanes=event.lanes)
    if moved:
        # Only our own flag: a later run may have set it again meanwhile.
        AdmissionState.objects.filter(pk=event.pk, last_run_at=now).update(index_pending=False)
    # After the index no longer lists them, so a page asking at once hears "admitted".
    notify_admitted(m.id for m in admitted)
    layout = event_layout(event.pk)
    throughput = measure_throughput(
        state.recent_counts,
        departures=state.recent_departures,
        tier_admissions={int(k): v for k, v in state.recent_tier_counts.items()},
        groups=[[t.id for t in group] for group in service_groups(layout.tiers)]
        if layout is not None
        else (),
        now=now,
        rate_per_minute=event.rate_per_minute,
        capacity=event.capacity,
        session_seconds=event.session_seconds,
        # A pre-queue let go fills the shop at once and every page reloads: not yet the pace.
        prequeue_let_go_at=event.started_at if event.prequeue_opens_at is not None else None,
    )
    if throughput is not None:
        pace_record(event.pk, throughput)


# ----------------------------------------------------------------------- in the join


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
        return _admit_joined(event, entries, now=now, head=head)
    ids = [entry.id for entry in entries]
    if QueueEntry.objects.filter(event_id=event.pk, status__in=QUEUED).exclude(pk__in=ids).exists():
        return []  # someone is in line already: newcomers queue behind them
    if not admission_lock_try(event.pk):
        return []  # a run is letting fans in right now: it or the next one takes these
    state, _ = AdmissionState.objects.get_or_create(event_id=event.pk)
    now = not_before_last_run(now, state)
    room = admission_room(event, state, now=now, batch_limit=len(entries))
    admitted = _admit_joined(event, entries[: room.n], now=now, head=head) if room.n > 0 else []
    admission_spend(state, event, room, now=now, admitted=len(admitted))
    # Only what this bookkeeping owns: a run's after-commit clears index_pending by itself.
    state.save(update_fields=["tokens", "refilled_at", "recent_counts"])
    return admitted


def _admit_joined(
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
    return line_reads.counts(layout).queue_length


def answer_admitted(
    entry: QueueEntry,
    *,
    event: Event,
    layout: EventLayout,
    queue_length: int,
    now: datetime,
    key: PassKey,
) -> TicketAnswer:
    """The answer of a fan let in by their join: admitted, with the pass and where to take
    it, exactly as the ticket endpoint hands them over (``entry_pass``); ``key`` signs it
    (read once for the batch: a read per pass cost more than the signature)."""
    return answer_from_facts(
        ticket_issue(
            TicketRef(
                entry_id=entry.id,
                event_id=entry.event_id,
                tier_id=entry.tier_id,
                lane=entry.lane,
            )
        ),
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
