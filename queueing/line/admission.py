"""Letting fans in: PostgreSQL first, one admission per event at a time.

Per run: ``n = min(capacity - active, rate credit, rate-window room, batch limit)``, the rate
credit earned by the time elapsed since the last run (``rules/admission_plan.py``); the next
``n`` are picked per tier in (priority, order key) order with ``FOR UPDATE SKIP LOCKED``, moved
to ``admitted`` by compare-and-set and audited in one transaction; the hot index is updated
after the commit. A transaction-scoped advisory lock makes a second, concurrent run (two beats,
a slot-freed trigger) skip instead of double-admitting; a killed worker's transaction simply
rolls back.

The on-sale's mode changes what a run may do: in ``maintenance`` nobody is let in; in
``passthrough`` the run lets the line in at the batch limit, past capacity and pace. The
rules for how many may go in now (``admission_room``) and what letting them in spends
(``admission_spend``) are shared with admission in the join itself (``join_admission.py``),
which takes the same lock.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from events.models import Event, EventMode, EventState, Tier
from queueing.hot import heartbeats, stats
from queueing.hot.channels import notify_admitted
from queueing.hot.client import HotIndexUnavailable
from queueing.line.index_sync import index_forget
from queueing.line.layouts import event_layout
from queueing.line.turn_mail import turn_mail_ask
from queueing.models import AdmissionState, AuditAction, QueueEntry
from queueing.records.audit import AuditItem, audit_append_many
from queueing.records.reentries import earlier_admissions_since
from queueing.records.transitions import Moved, transition_many
from queueing.rules.admission_plan import (
    RATE_WINDOW_SECONDS,
    TierDemand,
    TokenBucket,
    batch_size,
    bucket_refill,
    service_groups,
    split_batch,
)
from queueing.rules.eta import (
    PACE_WINDOW_SECONDS,
    admissions_record,
    departures_record,
    measure_throughput,
)
from queueing.rules.states import EntryStatus

logger = logging.getLogger(__name__)

# First key of the two-int advisory lock; the second is the event id.
ADMISSION_LOCK_NAMESPACE = 0x5752
INDEX_SYNC_GRACE_SECONDS = 10.0


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


def _waiting_at_most(event_id: int, tier_id: int, limit: int) -> int:
    """How many wait in a tier, counting no further than ``limit`` (cheap in a huge line)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {QueueEntry._meta.db_table} "
            "WHERE event_id = %s AND tier_id = %s AND status = %s LIMIT %s) AS head",
            [event_id, tier_id, EntryStatus.WAITING.value, limit],
        )
        return int(cursor.fetchone()[0])


def _pick(event_id: int, tier_id: int, limit: int) -> list[int]:
    return list(
        QueueEntry.objects.filter(event_id=event_id, tier_id=tier_id, status=EntryStatus.WAITING)
        .order_by("order_key")
        .select_for_update(skip_locked=True)
        .values_list("id", flat=True)[:limit]
    )


def _overdue(event: Event, ids: list[int], now: datetime) -> set[int]:
    """Candidates whose page has not been seen in time: they are expired, not admitted, so
    an abandoned tab never takes a shop slot. Without Redis, or while its index is flagged
    stale (heartbeats it could not record among what it missed), everyone counts as seen."""
    if event.hot_index_dirty:
        return set()
    event_id = event.pk
    try:
        deadlines = heartbeats.heartbeat_deadlines(event_id, ids)
    except HotIndexUnavailable:
        return set()
    cutoff = now.timestamp()
    return {i for i, d in deadlines.items() if d is not None and d < cutoff}


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


@dataclass(frozen=True)
class ManualAdmission:
    """Staff letting ``count`` fans in at once: the rate is bypassed, the capacity never."""

    count: int
    actor: str


def admission_run(
    *, event_id: int, now: datetime, manual: ManualAdmission | None = None
) -> AdmissionOutcome:
    with transaction.atomic():
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
        n = room.n
        admitted: list[Moved] = []
        expired: list[Moved] = []
        tier_names: dict[int, str] = {}
        if n > 0:
            tiers = list(Tier.objects.filter(event_id=event_id).order_by("priority", "id"))
            tier_names = {tier.id: tier.name for tier in tiers}
            split = split_batch(
                [TierDemand(t.id, t.share, _waiting_at_most(event_id, t.id, n)) for t in tiers],
                n,
                {int(k): v for k, v in state.tier_credit.items()},
            )
            candidates = [
                entry_id
                for tier_id, take in split.take.items()
                if take
                for entry_id in _pick(event_id, tier_id, take)
            ]
            overdue = _overdue(event, candidates, now)
            expired = transition_many(
                ids=[i for i in candidates if i in overdue],
                to=EntryStatus.EXPIRED,
                expected=[EntryStatus.WAITING],
                now=now,
            )
            admitted = transition_many(
                ids=[i for i in candidates if i not in overdue],
                to=EntryStatus.ADMITTED,
                expected=[EntryStatus.WAITING],
                now=now,
                extra={
                    "admitted_at": now,
                    "pass_expires_at": now + timedelta(seconds=event.session_seconds),
                },
            )
            service_rank = {tier.id: rank for rank, tier in enumerate(tiers)}
            admitted.sort(key=lambda moved: (service_rank[moved.tier_id], moved.order_key))
            state.tier_credit = {str(k): v for k, v in split.credit.items()}
        audit_append_many(
            event_id=event_id,
            actor=manual.actor if manual else "system:admission",
            at=now,
            items=[
                AuditItem(
                    action=AuditAction.ADMITTED,
                    ticket_id=moved.public_id,
                    data={"tier": tier_names[moved.tier_id], "order_key": moved.order_key},
                )
                for moved in admitted
            ]
            + [
                AuditItem(
                    action=AuditAction.EXPIRED,
                    ticket_id=moved.public_id,
                    data={"reason": "no_heartbeat", "from": moved.previous},
                )
                for moved in expired
            ],
        )
        # Passthrough's admissions spend the credit too (down to none): back in queue or
        # safety net, the pace starts from an empty bucket.
        by_tier = Counter(moved.tier_id for moved in admitted)
        admission_spend(
            state,
            event,
            room,
            now=now,
            admitted=len(admitted),
            spends_credit=manual is None,
            by_tier=by_tier,
        )
        state.last_run_at = now
        state.index_pending = bool(admitted or expired)
        state.save()
    _after_admission(event, state, admitted, expired, heal_index=heal_index, now=now)
    return AdmissionOutcome(admitted=tuple(admitted), expired=tuple(expired))


def _after_admission(
    event: Event,
    state: AdmissionState,
    admitted: list[Moved],
    expired: list[Moved],
    *,
    heal_index: bool,
    now: datetime,
) -> None:
    if heal_index:
        # A previous run committed but never reached the hot index (its worker died).
        Event.objects.filter(pk=event.pk).update(hot_index_dirty=True)
    # Mails need PostgreSQL and the broker, not the hot index: asked for whatever Redis says.
    turn_mail_ask(m.id for m in admitted)
    moved = admitted + expired
    if not index_forget(event.pk, moved):
        return
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
    if throughput is None:
        return
    try:
        stats.write_throughput(event.pk, throughput)
    except HotIndexUnavailable:
        pass  # estimates fall back to the configured pace until the next run
