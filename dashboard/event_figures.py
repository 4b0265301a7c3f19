"""Live figures of one on-sale for the staff dashboard."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count
from django.db.models.functions import TruncMinute

from dashboard.charts import bars_svg, line_svg
from events.models import Event, EventState
from queueing.line.reads import event_public_view, line_reads
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.rules.states import EntryStatus

MINUTES = 60


def human_duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _per_minute(times_field: str, event: Event, since: datetime) -> dict[int, int]:
    rows = (
        QueueEntry.objects.filter(event=event, **{f"{times_field}__gt": since})
        .annotate(minute=TruncMinute(times_field))
        .values("minute")
        .annotate(n=Count("id"))
        .values_list("minute", "n")
    )
    return {int(minute.timestamp() // 60): n for minute, n in rows}


def event_figures(event: Event, *, now: datetime) -> dict[str, Any]:
    view = event_public_view(event, now=now)
    # A closed on-sale takes no newcomer: quoting one a wait would tell staff a story.
    eta_new = view.eta_new if view.state != EventState.CLOSED else None
    entries = QueueEntry.objects.filter(event=event)
    minute_ago, hour_ago = now - timedelta(minutes=1), now - timedelta(hours=1)
    joined_last_hour = entries.filter(joined_at__gt=hour_ago).count()
    abandoned_last_hour = entries.filter(
        status__in=[EntryStatus.LEFT, EntryStatus.EXPIRED],
        admitted_at__isnull=True,
        reentered_at__isnull=True,  # went back in line: had been admitted
        ended_at__gt=hour_ago,
    ).count()
    # The audit trail's rejected records (index audit_event_action_at); the wrong-code budget
    # per address bounds how many there can be.
    wrong_codes_last_hour = AuditRecord.objects.filter(
        event=event, action=AuditAction.REJECTED, at__gt=hour_ago
    ).count()
    this_minute = int(now.timestamp() // 60)
    minutes = list(range(this_minute - MINUTES + 1, this_minute + 1))
    arrivals = _per_minute("joined_at", event, hour_ago)
    admissions = _per_minute("admitted_at", event, hour_ago)
    waiting = line_reads.line_samples(event.id, minutes)
    return {
        "slug": event.slug,
        "name": event.name,
        "state": view.state.value,
        "mode": event.mode,
        "waiting": view.queue_length,
        "active": view.active,
        "capacity": event.capacity,
        "rate_per_minute": event.rate_per_minute,
        "admissions_per_minute": entries.filter(admitted_at__gt=minute_ago).count(),
        "arrivals_per_minute": entries.filter(joined_at__gt=minute_ago).count(),
        "abandoned_last_hour": abandoned_last_hour,
        "wrong_access_codes_last_hour": wrong_codes_last_hour,
        "abandonment_rate": (abandoned_last_hour / joined_last_hour) if joined_last_hour else None,
        "wait_p50_s": eta_new.p50 if eta_new else None,
        "wait_p90_s": eta_new.p90 if eta_new else None,
        "wait_text": (
            f"{human_duration(eta_new.p50)} / {human_duration(eta_new.p90)}" if eta_new else "–"
        ),
        "charts": {
            "waiting": line_svg(waiting, label="Fans in line, last hour"),
            "arrivals": bars_svg(
                [arrivals.get(m, 0) for m in minutes],
                label="Arrivals per minute, last hour",
                color="#1d4ed8",
            ),
            "admissions": bars_svg(
                [admissions.get(m, 0) for m in minutes], label="Admissions per minute, last hour"
            ),
        },
    }
