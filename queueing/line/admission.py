"""Letting fans in: PostgreSQL first, one admission per event at a time.

Per run: ``n = min(capacity - active, rate credit, rate-window room, batch limit)``, the rate
credit earned by the time elapsed since the last run (``rules/admission_plan.py``); the next
``n`` are picked per tier in (priority, order key) order with ``FOR UPDATE SKIP LOCKED``, moved
to ``admitted`` by compare-and-set and audited in one transaction; the hot index is updated
after the commit. A transaction-scoped advisory lock makes a second, concurrent run (two beats,
a slot-freed trigger) skip instead of double-admitting; a killed worker's transaction simply
rolls back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from events.models import Event, EventState, Tier
from queueing.hot import heartbeats, stats
from queueing.hot.channels import notify_admitted
from queueing.hot.client import HotIndexUnavailable
from queueing.line.index_sync import index_forget
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
    split_batch,
)
from queueing.rules.eta import WINDOW_SECONDS, configured_pace, measure_throughput
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


def _try_lock(event_id: int) -> bool:
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


def _overdue(event_id: int, ids: list[int], now: datetime) -> set[int]:
    """Candidates whose page has not been seen in time: they are expired, not admitted, so
    an abandoned tab never takes a shop slot. Without Redis, everyone counts as seen."""
    try:
        deadlines = heartbeats.heartbeat_deadlines(event_id, ids)
    except HotIndexUnavailable:
        return set()
    cutoff = now.timestamp()
    return {i for i, d in deadlines.items() if d is not None and d < cutoff}


def _count_recent(counts: list[list[int]], *, now: datetime, admitted: int) -> list[list[int]]:
    second = int(now.timestamp())
    kept = [pair for pair in counts if pair[0] > second - WINDOW_SECONDS]
    if admitted:
        if kept and kept[-1][0] == second:
            kept[-1][1] += admitted
        else:
            kept.append([second, admitted])
    return kept


@dataclass(frozen=True)
class ManualAdmission:
    """Staff letting ``count`` fans in at once: the rate is bypassed, the capacity never."""

    count: int
    actor: str


def admission_run(
    *, event_id: int, now: datetime, manual: ManualAdmission | None = None
) -> AdmissionOutcome:
    with transaction.atomic():
        if not _try_lock(event_id):
            return AdmissionOutcome(skipped="busy")
        event = Event.objects.filter(pk=event_id).first()
        if event is None:
            return AdmissionOutcome(skipped="missing")
        state, _ = AdmissionState.objects.get_or_create(event_id=event_id)
        if state.last_run_at is not None and now < state.last_run_at:
            # A caller with an older clock reading (a slow tick loop): never run in the past,
            # or the bucket and the 60-second window could be fooled.
            now = state.last_run_at
        # The previous run committed but its index update never finished (its worker died),
        # judged after a grace period so that a healthy overlapping run is not mistaken.
        heal_index = state.index_pending and (
            state.last_run_at is None
            or (now - state.last_run_at).total_seconds() > INDEX_SYNC_GRACE_SECONDS
        )
        allowed_states = (EventState.OPEN, EventState.PAUSED) if manual else (EventState.OPEN,)
        if event.state_at(now) not in allowed_states or event.started_at is None:
            return AdmissionOutcome(skipped="not_open")
        active = QueueEntry.objects.filter(event_id=event_id, status=EntryStatus.ADMITTED).count()
        bucket = TokenBucket(state.tokens, state.refilled_at)
        in_window = 0
        if event.rate_per_minute:
            bucket = bucket_refill(
                bucket,
                rate_per_minute=event.rate_per_minute,
                burst_seconds=settings.WR_ADMISSION_BURST_SECONDS,
                now=now,
            )
            window_start = now - timedelta(seconds=RATE_WINDOW_SECONDS)
            in_window = QueueEntry.objects.filter(
                event_id=event_id, admitted_at__gt=window_start
            ).count() + earlier_admissions_since(event_id=event_id, since=window_start)
        n = batch_size(
            capacity=event.capacity,
            active=active,
            rate_per_minute=0 if manual else event.rate_per_minute,
            tokens=bucket.tokens,
            admitted_in_window=in_window,
            batch_limit=manual.count if manual else settings.WR_ADMISSION_BATCH,
        )
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
            overdue = _overdue(event_id, candidates, now)
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
        # Without a rate there is no bucket to drain (no debt when a rate is set later); a
        # manual admission is outside the pace and leaves the bucket as it was.
        if not event.rate_per_minute:
            state.tokens = 0.0
        elif not manual:
            state.tokens = max(0.0, bucket.tokens - len(admitted))
        state.refilled_at = bucket.refilled_at
        state.last_run_at = now
        state.recent_counts = _count_recent(state.recent_counts, now=now, admitted=len(admitted))
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
    moved = admitted + expired
    if not index_forget(event.pk, moved):
        return
    if moved:
        # Only our own flag: a later run may have set it again meanwhile.
        AdmissionState.objects.filter(pk=event.pk, last_run_at=now).update(index_pending=False)
    # After the index no longer lists them, so a page asking at once hears "admitted".
    notify_admitted(m.id for m in admitted)
    throughput = measure_throughput(
        [(second, count) for second, count in state.recent_counts],
        now=now,
        prior_lam=configured_pace(
            rate_per_minute=event.rate_per_minute,
            capacity=event.capacity,
            session_seconds=event.session_seconds,
        ),
    )
    if throughput is None:
        return
    try:
        stats.write_throughput(
            event.pk, lam=throughput.lam, scv=throughput.scv, measured=throughput.measured
        )
    except HotIndexUnavailable:
        pass  # estimates fall back to the configured pace until the next run
