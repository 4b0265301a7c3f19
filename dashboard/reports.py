"""The audit report of one on-sale: fairness (order) and honesty (wait quotes)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from dashboard.fairness import (
    QuotedWait,
    count_inversions,
    coverage,
    kendall_tau,
    median_abs_error,
    percentiles,
)
from events.models import Event
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.rules.states import EntryStatus


@dataclass(frozen=True)
class TierFairness:
    tier: str
    admitted: int
    order_inversions: int
    kendall_tau: float | None


def _admission_order(event: Event) -> list[Any]:
    """Ticket ids in the order the trail records their admission."""
    return list(
        AuditRecord.objects.filter(event=event, action=AuditAction.ADMITTED)
        .order_by("seq")
        .values_list("ticket_id", flat=True)
    )


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
        )
    }
    order_keys_by_tier: dict[str, list[int]] = defaultdict(list)
    for ticket_id in _admission_order(event):
        row = entries.get(ticket_id)
        if row is not None:
            order_keys_by_tier[row["tier__name"]].append(row["order_key"])
    tiers = []
    for tier, keys in sorted(order_keys_by_tier.items()):
        inversions = count_inversions(keys)
        tiers.append(TierFairness(tier, len(keys), inversions, kendall_tau(inversions, len(keys))))
    total_inversions = sum(t.order_inversions for t in tiers)
    total_pairs = sum(t.admitted * (t.admitted - 1) // 2 for t in tiers)

    waits = [
        QuotedWait(
            waited=(row["admitted_at"] - row["joined_at"]).total_seconds(),
            p10=row["quoted_p10"],
            p50=row["quoted_p50"],
            p90=row["quoted_p90"],
        )
        for row in entries.values()
        if row["admitted_at"] is not None
    ]
    # Abandonment: fans who left the line, or let it expire, before being admitted.
    # Fans sent home by a close (revoked) did not abandon.
    abandoned = sum(
        1
        for row in entries.values()
        if row["admitted_at"] is None and row["status"] in (EntryStatus.LEFT, EntryStatus.EXPIRED)
    )
    return {
        "event": event.slug,
        "joined": len(entries),
        "admitted": len(waits),
        "order_inversions": total_inversions,
        "kendall_tau": 1 - 2 * total_inversions / total_pairs if total_pairs else None,
        "per_tier": [
            {
                "tier": t.tier,
                "admitted": t.admitted,
                "order_inversions": t.order_inversions,
                "kendall_tau": t.kendall_tau,
            }
            for t in tiers
        ],
        "eta_p10_p90_coverage": coverage(waits),
        "eta_median_abs_error_s": median_abs_error(waits),
        "abandonment_rate": abandoned / len(entries) if entries else None,
        "wait_s": percentiles([w.waited for w in waits]),
        "order_reference": "order key: join order, and the published shuffle for the pre-queue",
    }
