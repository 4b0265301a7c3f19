"""The audit report of one on-sale: fairness (order) and honesty (wait quotes)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count

from dashboard.fairness import (
    QuotedWait,
    RandomAdmission,
    count_inversions,
    coverage,
    kendall_tau,
    median_abs_error,
    percentiles,
    random_order_inversions,
)
from events.models import Event, QueueOrder, Tier
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.rules.shuffle import place_key
from queueing.rules.states import EntryStatus


@dataclass(frozen=True)
class TierFairness:
    tier: str
    admitted: int
    order_inversions: int
    kendall_tau: float | None


@dataclass(frozen=True)
class FirstAdmission:
    at: datetime
    order_key: int | None  # the key the fan was admitted by, as the trail records it


def _first_admissions(event: Event) -> dict[Any, FirstAdmission]:
    """Each admitted ticket's first admission, in the order the trail records them (the seq
    order of the on-sale's root chain, which holds every ``admitted`` record whatever its
    lanes: records/audit.py, ``ROOT_ONLY``). A fan who
    went back in line (``reentered``) is admitted again from the front of their tier: that
    second admission is the re-entry's, not the line's order, and their wait is the first."""
    first: dict[Any, FirstAdmission] = {}
    for ticket_id, at, data in (
        AuditRecord.objects.filter(event=event, action=AuditAction.ADMITTED)
        .order_by("seq")
        .values_list("ticket_id", "at", "data")
    ):
        if ticket_id not in first:
            key = data.get("order_key") if isinstance(data, dict) else None
            first[ticket_id] = FirstAdmission(at=at, order_key=key)
    return first


def _first_admitted_at(row: dict[str, Any], first: FirstAdmission | None) -> datetime | None:
    """When the fan was first let in: the entry's own time, unless they went back in line
    since (it is then their second admission's, or none while they wait): the trail's."""
    if row["reentered_at"] is not None and first is not None:
        return first.at
    return row["admitted_at"]


@dataclass(frozen=True)
class Fairness:
    tiers: list[TierFairness]
    order_inversions: int
    kendall_tau: float | None
    # A random line's admitted records whose order key is not the place the revealed seed
    # gives their ticket (None: a fifo line, judged by its keys as recorded).
    place_mismatches: int | None = None


def _fairness(
    order_keys_by_tier: dict[str, list[int]],
    counted: dict[str, int] | None = None,
    place_mismatches: int | None = None,
) -> Fairness:
    """``counted``: each tier's inversions when already counted (a random line's)."""
    tiers = []
    for tier, order in sorted(order_keys_by_tier.items()):
        inversions = counted[tier] if counted is not None else count_inversions(order)
        tiers.append(
            TierFairness(tier, len(order), inversions, kendall_tau(inversions, len(order)))
        )
    total_inversions = sum(t.order_inversions for t in tiers)
    total_pairs = sum(t.admitted * (t.admitted - 1) // 2 for t in tiers)
    return Fairness(
        tiers=tiers,
        order_inversions=total_inversions,
        kendall_tau=1 - 2 * total_inversions / total_pairs if total_pairs else None,
        place_mismatches=place_mismatches,
    )


# Each admitted ticket's first admission, in the trail's order, leaving out the fans passed
# over while away who came back (``back``: let in from the front of their tier after some who
# were behind them, by the away rule, not the line's order; counted apart as
# ``came_back_after_turn``): the rule of ``_first_admissions``, in one query that sends only
# what is counted per fan (the trail's rows and their JSON stay in PostgreSQL), so that a
# report of a million fans loads what it counts. Parameters: the event, ``admitted``, the
# event, the event, ``back``.
_FIRST_ADMISSIONS = f"""
  FROM (SELECT DISTINCT ON (ticket_id) ticket_id, seq, data
          FROM {AuditRecord._meta.db_table}
         WHERE event_id = %s AND action = %s AND ticket_id IS NOT NULL
         ORDER BY ticket_id, seq) a
  JOIN {QueueEntry._meta.db_table} q ON q.public_id = a.ticket_id AND q.event_id = %s
  JOIN {Tier._meta.db_table} t ON t.id = q.tier_id
 WHERE NOT EXISTS (SELECT 1 FROM {AuditRecord._meta.db_table} b
                    WHERE b.ticket_id = a.ticket_id AND b.event_id = %s AND b.action = %s)
 ORDER BY a.seq
"""

# Its tier and the key it was admitted by (the trail's, else the entry's).
_ORDER_SQL = (
    """
SELECT t.name,
       COALESCE(CASE WHEN jsonb_typeof(a.data -> 'order_key') = 'number'
                     THEN (a.data ->> 'order_key')::numeric::bigint END, q.order_key)"""
    + _FIRST_ADMISSIONS
)

# A random line's: the ticket, its entry id, the key recorded, the run's settled id and the
# ticket its joined record says the place is the hash of (a rejoin keeps an unused place),
# recomputed against the revealed seed here. Two parameters more first: the event, ``joined``.
_RANDOM_ORDER_SQL = (
    f"""
SELECT t.name, a.ticket_id, q.id,
       CASE WHEN jsonb_typeof(a.data -> 'order_key') = 'number'
            THEN (a.data ->> 'order_key')::numeric::bigint END,
       CASE WHEN jsonb_typeof(a.data -> 'settled_id') = 'number'
            THEN (a.data ->> 'settled_id')::numeric::bigint END,
       (SELECT j.data ->> 'placed_by' FROM {AuditRecord._meta.db_table} j
         WHERE j.ticket_id = a.ticket_id AND j.event_id = %s AND j.action = %s LIMIT 1)"""
    + _FIRST_ADMISSIONS
)


def _random_fairness(event: Event) -> Fairness:
    """A random line judged by its claim (dashboard/fairness.py), each place recomputed from
    the seed: every admission took the lowest place among the entries committed before it.
    A place that is not its ticket's hash, or one taken twice (two tickets named the same one
    whose place they kept), is a mismatch."""
    admissions: dict[str, list[RandomAdmission]] = defaultdict(list)
    mismatches = 0
    taken: set[str] = set()
    with connection.cursor() as cursor:
        cursor.execute(
            _RANDOM_ORDER_SQL,
            [
                event.id,
                AuditAction.JOINED.value,
                event.id,
                AuditAction.ADMITTED.value,
                event.id,
                event.id,
                AuditAction.BACK.value,
            ],
        )
        while rows := cursor.fetchmany(10_000):
            for tier, ticket_id, entry_id, recorded, settled_id, placed_by in rows:
                hashed = str(placed_by or ticket_id)
                place = place_key(event.shuffle_seed, hashed)
                mismatches += recorded != place or hashed in taken
                taken.add(hashed)
                admissions[tier].append(
                    RandomAdmission(place=place, entry_id=entry_id, settled_id=settled_id or 0)
                )
    return _fairness(
        {tier: [a.place for a in found] for tier, found in admissions.items()},
        counted={tier: random_order_inversions(found) for tier, found in admissions.items()},
        place_mismatches=mismatches,
    )


def event_fairness(event: Event) -> Fairness:
    """Order inversions and Kendall tau per tier, among first admissions."""
    if event.queue_order == QueueOrder.RANDOM:
        return _random_fairness(event)
    order_keys_by_tier: dict[str, list[int]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(
            _ORDER_SQL,
            [event.id, AuditAction.ADMITTED.value, event.id, event.id, AuditAction.BACK.value],
        )
        while rows := cursor.fetchmany(10_000):
            for tier, key in rows:
                order_keys_by_tier[tier].append(key)
    return _fairness(order_keys_by_tier)


def event_report(event: Event) -> dict[str, Any]:
    entries = {
        row["public_id"]: row
        for row in QueueEntry.objects.filter(event=event).values(
            "public_id",
            "tier__name",
            "order_key",
            "status",
            "joined_at",
            "admitted_at",
            "quoted_p10",
            "quoted_p50",
            "quoted_p90",
            "reentered_at",
        )
    }
    first_admissions = _first_admissions(event)
    fairness = event_fairness(event)

    waits = [
        QuotedWait(
            waited=(first_admitted - row["joined_at"]).total_seconds(),
            p10=row["quoted_p10"],
            p50=row["quoted_p50"],
            p90=row["quoted_p90"],
        )
        for public_id, row in entries.items()
        if (first_admitted := _first_admitted_at(row, first_admissions.get(public_id))) is not None
    ]
    # Abandonment: fans who left the line, or let it expire, before being admitted (a fan
    # who went back in line had been). Fans sent home by a close (revoked) did not abandon.
    abandoned = sum(
        1
        for row in entries.values()
        if row["admitted_at"] is None
        and row["reentered_at"] is None
        and row["status"] in (EntryStatus.LEFT, EntryStatus.EXPIRED)
    )
    away = dict(
        AuditRecord.objects.filter(event=event, action__in=[AuditAction.AWAY, AuditAction.BACK])
        .values_list("action")
        .annotate(n=Count("ticket_id", distinct=True))
        .values_list("action", "n")
    )
    return {
        "event": event.slug,
        "joined": len(entries),
        "admitted": len(waits),
        # Fans away at their turn (passed over, place kept), and those of them who came back.
        "passed_over_away": away.get(AuditAction.AWAY.value, 0),
        "came_back_after_turn": away.get(AuditAction.BACK.value, 0),
        "order_inversions": fairness.order_inversions,
        "kendall_tau": fairness.kendall_tau,
        "queue_order": event.queue_order,
        "place_mismatches": fairness.place_mismatches,
        "per_tier": [
            {
                "tier": t.tier,
                "admitted": t.admitted,
                "order_inversions": t.order_inversions,
                "kendall_tau": t.kendall_tau,
            }
            for t in fairness.tiers
        ],
        "eta_p10_p90_coverage": coverage(waits),
        "eta_median_abs_error_s": median_abs_error(waits),
        "abandonment_rate": abandoned / len(entries) if entries else None,
        "wait_s": percentiles([w.waited for w in waits]),
        "order_reference": (
            "place key: sha256(seed + ':' + ticket_id), first 52 bits, lowest among the "
            "entries committed before each admission"
            if event.queue_order == QueueOrder.RANDOM
            else "order key: join order, and the published shuffle for the pre-queue"
        ),
    }
