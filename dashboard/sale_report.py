"""The report after the sale (``/dashboard/events/{slug}/report``): what happened to the line of
one on-sale, told in figures, tables and charts, for staff and auditors.

The figures are aggregates computed in PostgreSQL (dashboard/report_queries.py); the
fairness figures are the JSON report's own (dashboard/reports.py), so the page and
``GET /api/v1/audit/events/{slug}/report`` cannot disagree on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from dashboard.charts import axis_chart_svg
from dashboard.draw_report import DrawReport, draw_report
from dashboard.report_queries import Bucket, Summary, buckets, summaries, wait_histogram
from dashboard.report_scales import (
    MAX_BINS,
    Timeline,
    duration_text,
    timeline,
    wait_bin_seconds,
)
from dashboard.reports import Fairness, TierFairness, event_fairness
from events.models import Event, EventState, Tier
from queueing.models import AuditAction, AuditRecord

ALL_TIERS = "All tiers"
# How many labels the time axis and the wait axis carry at most.
X_TICKS = 6
# Histograms are shown two by two: drawn narrower, their text stays as large as the others'.
HISTOGRAM_WIDTH = 440


def _empty(tier_id: int | None) -> Summary:
    return Summary(tier_id, *([0] * 10), None, None, None, None, 0, 0, 0, 0, None, None, None)


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass(frozen=True)
class TierReport:
    name: str
    figures: Summary
    fairness: TierFairness | None
    histogram: list[int] = field(default_factory=list)
    chart: str = ""

    @property
    def left_or_expired_in_line(self) -> int:
        return self.figures.left_line + self.figures.expired_line

    @property
    def abandonment_rate(self) -> float | None:
        """The JSON report's: left or expired before any admission, of all who joined."""
        return _ratio(self.left_or_expired_in_line, self.figures.joined)

    @property
    def abandoned_session_rate(self) -> float | None:
        return _ratio(self.figures.abandoned_sessions, self.figures.admitted)

    @property
    def reentry_rate(self) -> float | None:
        return _ratio(self.figures.reentered, self.figures.admitted)

    @property
    def coverage(self) -> float | None:
        return _ratio(self.figures.inside_quote, self.figures.quoted)


@dataclass(frozen=True)
class SoldOut:
    """When the on-sale sold out and who said so: the trail's ``event_sold_out`` record."""

    at: datetime
    by: str  # "the shop", or "staff (alice)"
    message: str


def sold_out_told(event: Event) -> SoldOut | None:
    """None unless it sold out; one query on the trail then (its one such record)."""
    if event.sold_out_at is None:
        return None
    record = (
        AuditRecord.objects.filter(event_id=event.pk, action=AuditAction.EVENT_SOLD_OUT)
        .only("actor")
        .first()
    )
    actor = record.actor if record is not None else ""
    by = "the shop" if actor == "shop" else f"staff ({actor.removeprefix('staff:')})"
    return SoldOut(at=event.sold_out_at, by=by, message=event.sold_out_message)


@dataclass(frozen=True)
class SaleReport:
    event: Event
    state: EventState
    generated_at: datetime
    overall: TierReport
    tiers: list[TierReport]
    fairness: Fairness
    scale: Timeline | None  # None when nobody joined
    # From the first join to the last move in line (or to now, while the on-sale runs).
    span: tuple[datetime, datetime] | None
    buckets: list[Bucket]
    wait_bin_seconds: int
    charts: dict[str, str]
    sold_out: SoldOut | None = None
    draw: DrawReport | None = None  # an on-sale sold by a draw (dashboard/draw_report.py)

    @property
    def running(self) -> bool:
        return self.state != EventState.CLOSED

    def bucket_starts(self) -> list[datetime]:
        return [] if self.scale is None else [self.scale.start(i) for i in range(self.scale.count)]


def _ticks(count: int, text: list[str]) -> list[tuple[int, str]]:
    """About ``X_TICKS`` evenly spaced labels, on slot boundaries."""
    every = max(1, -(-count // X_TICKS))
    return [(i, text[i]) for i in range(0, count + 1, every) if i < len(text)]


def _time_labels(scale: Timeline) -> list[str]:
    starts = [scale.start(i) for i in range(scale.count + 1)]
    several_days = starts[-1] - starts[0] > timedelta(days=1)
    fmt = "%d %b %H:%M" if several_days else ("%H:%M:%S" if scale.seconds < 60 else "%H:%M")
    return [timezone.localtime(s).strftime(fmt) for s in starts]


def _time_charts(scale: Timeline, rows: list[Bucket]) -> dict[str, str]:
    labels = _time_labels(scale)
    ticks = _ticks(scale.count, labels)
    width = duration_text(scale.seconds)
    x_title = f"Time ({timezone.get_current_timezone_name()}), bars of {width}"

    def peak(values: list[int]) -> str:
        top = max(values, default=0)
        return f"{top:,} at {labels[values.index(top)]}" if top else "none"

    waiting = [b.waiting for b in rows]
    arrivals = [b.arrivals for b in rows]
    admissions = [b.admissions for b in rows]
    return {
        "waiting": axis_chart_svg(
            waiting,
            kind="line",
            label="Fans waiting in line over time",
            summary=f"Fans in line at the end of each {width}; longest {peak(waiting)}.",
            x_ticks=ticks,
            x_title=x_title.replace("bars", "steps"),
            y_title="Fans in line",
        ),
        "arrivals": axis_chart_svg(
            arrivals,
            kind="bars",
            label=f"Arrivals per {width}",
            summary=f"{sum(arrivals):,} fans joined; most in one {width}: {peak(arrivals)}.",
            x_ticks=ticks,
            x_title=x_title,
            y_title="Fans joining",
        ),
        "admissions": axis_chart_svg(
            admissions,
            kind="bars",
            label=f"Admissions per {width}",
            summary=f"{sum(admissions):,} fans let in; most in one {width}: {peak(admissions)}.",
            x_ticks=ticks,
            x_title=x_title,
            y_title="Fans let in",
        ),
    }


def _histogram_chart(name: str, counts: list[int], width: int) -> str:
    labels = [duration_text(i * width) for i in range(len(counts) + 1)]
    busiest = max(range(len(counts)), key=counts.__getitem__) if any(counts) else None
    summary = (
        f"{sum(counts):,} waits in bins of {duration_text(width)}; the most common "
        f"{labels[busiest]} to {labels[busiest + 1]} ({counts[busiest]:,} fans)."
        if busiest is not None
        else "Nobody was let in."
    )
    return axis_chart_svg(
        counts,
        kind="bars",
        label=f"Waits from joining to first admission, {name}",
        summary=summary,
        x_ticks=_ticks(len(counts), labels),
        x_title=f"Wait (bins of {duration_text(width)})",
        y_title="Fans",
        width=HISTOGRAM_WIDTH,
    )


def sale_report(event: Event, *, now: datetime) -> SaleReport:
    """Everything the page and its CSV show, in five queries: the tiers, the figures per
    tier, the buckets over time, the wait histogram, and the order of first admissions
    (which sends one number per admitted fan: inversions are counted in Python); and for an
    on-sale sold by a draw, three more (dashboard/draw_report.py)."""
    tiers = list(Tier.objects.filter(event=event).values_list("id", "name"))
    found = {s.tier_id: s for s in summaries(event.id)}
    overall_figures = found.get(None, _empty(None))
    state = event.state_at(now)
    fairness = event_fairness(event)
    fair_by_name = {t.tier: t for t in fairness.tiers}

    scale, span, rows, charts = None, None, [], {}
    if (first := overall_figures.first_at) is not None:
        last = now if state != EventState.CLOSED else overall_figures.last_at
        span = (first, max(last or now, first))
        scale = timeline(*span)
        rows = buckets(event.id, scale)
        charts = _time_charts(scale, rows)

    width = wait_bin_seconds(overall_figures.wait_max or 0)
    bins = max(1, min(MAX_BINS, int((overall_figures.wait_max or 0) // width) + 1))
    histograms = {}
    if overall_figures.admitted:
        histograms = wait_histogram(event.id, width=width, bins=bins)
    several = len(tiers) > 1

    tier_reports = []
    for tier_id, name in tiers:
        counts = histograms.get(tier_id, [0] * bins)
        tier_reports.append(
            TierReport(
                name=name,
                figures=found.get(tier_id, _empty(tier_id)),
                fairness=fair_by_name.get(name),
                histogram=counts,
                chart=_histogram_chart(name, counts, width) if overall_figures.admitted else "",
            )
        )
    all_counts = [sum(column) for column in zip(*histograms.values(), strict=True)] or [0] * bins
    overall = TierReport(
        name=ALL_TIERS,
        figures=overall_figures,
        fairness=(
            TierFairness(
                ALL_TIERS,
                sum(t.admitted for t in fairness.tiers),
                fairness.order_inversions,
                fairness.kendall_tau,
            )
            if fairness.tiers
            else None
        ),
        histogram=all_counts,
        chart=(
            _histogram_chart(ALL_TIERS.lower(), all_counts, width)
            if overall_figures.admitted and several
            else ""
        ),
    )
    return SaleReport(
        event=event,
        state=state,
        generated_at=now,
        overall=overall,
        tiers=tier_reports,
        fairness=fairness,
        scale=scale,
        span=span,
        buckets=rows,
        wait_bin_seconds=width,
        charts=charts,
        sold_out=sold_out_told(event),
        draw=draw_report(event),
    )
