"""The report after the sale as CSV: one long table (``section, tier, from, to, measure,
value``) that a spreadsheet's pivot or a data frame reads as it is, rather than several
tables of different shapes in one file.

An on-sale sold by a draw adds a ``draw`` section: the window, the registrations by tier and
route, and once drawn the list's commitment, the seed revealed, and each tier's outcome and
invitations (the page's "Registration and draw", dashboard/draw_report.py)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import timedelta

from dashboard.draw_report import DrawReport
from dashboard.registration_panel import TierCounts
from dashboard.sale_report import SaleReport, TierReport

COLUMNS = ["section", "tier", "from", "to", "measure", "value"]


def _figures(tier: TierReport) -> Iterator[tuple[str, object]]:
    f = tier.figures
    yield from (
        ("joined", f.joined),
        ("admitted", f.admitted),
        ("still_waiting", f.still_waiting),
        ("left_line", f.left_line),
        ("expired_line", f.expired_line),
        ("revoked_line", f.revoked_line),
        ("abandonment_rate", tier.abandonment_rate),
        ("completed", f.completed),
        ("abandoned_sessions", f.abandoned_sessions),
        ("expired_sessions", f.expired_sessions),
        ("reentered", f.reentered),
        ("reentry_rate", tier.reentry_rate),
        ("wait_p10_s", f.wait_p10),
        ("wait_p50_s", f.wait_p50),
        ("wait_p90_s", f.wait_p90),
        ("wait_max_s", f.wait_max),
        ("quoted", f.quoted),
        ("inside_quote", f.inside_quote),
        ("under_quote", f.under_quote),
        ("over_quote", f.over_quote),
        ("quote_coverage", tier.coverage),
        ("quote_median_abs_error_s", f.median_abs_error),
    )
    if tier.fairness is not None:
        yield ("order_inversions", tier.fairness.order_inversions)
        yield ("kendall_tau", tier.fairness.kendall_tau)


def _registrations(counts: TierCounts) -> Iterator[tuple[str, object]]:
    yield from (
        ("registered", counts.registered),
        ("registered_by_email", counts.by_email),
        ("registered_by_shop", counts.by_shop),
        ("confirmed", counts.confirmed),
    )


def _outcome(counts: TierCounts) -> Iterator[tuple[str, object]]:
    """What became of a tier's registrations after the draw, and of their invitations."""
    yield from (
        ("lost", counts.lost),
        ("invitations_sent", counts.winners_invited + counts.waitlist_invited),
        ("invitations_used", counts.used),
        ("invitations_lapsed", counts.lapsed),
        ("invitations_unused", counts.unused),
        ("waitlist_promoted", counts.waitlist_invited),
    )


def _draw_rows(draw: DrawReport, *, all_tiers: str) -> Iterator[list[object]]:
    about = (
        ("opens_at", draw.opens_at.isoformat()),
        ("closes_at", draw.closes_at.isoformat()),
        ("winners_per_tier", draw.winners),
        ("waitlist_per_tier", draw.waitlist),
        ("invitation_hours", draw.invitation_hours),
        ("draw_seed_sha256", draw.draw_seed_sha256),
    )
    for measure, value in about:
        yield ["draw", "", "", "", measure, value]
    if draw.drawn_at is not None:
        # The seed only with the draw: before it, it would let anyone foretell the winners.
        yield ["draw", "", "", "", "drawn_at", draw.drawn_at.isoformat()]
        yield ["draw", "", "", "", "list_root", draw.list_root]
        yield ["draw", "", "", "", "list_count", _cell(draw.list_count)]
        yield ["draw", "", "", "", "draw_seed", _cell(draw.draw_seed)]
    for counts in (draw.total, *draw.registrations):
        name = all_tiers if counts is draw.total else counts.name
        for measure, value in _registrations(counts):
            yield ["draw", name, "", "", measure, value]
    if draw.drawn_at is None:
        return
    # The drawn figures as the draw's own record holds them; the outcomes as they stand.
    yield ["draw", all_tiers, "", "", "in_list", _cell(draw.list_count)]
    yield ["draw", all_tiers, "", "", "winners", draw.total.won]
    yield ["draw", all_tiers, "", "", "waitlisted", draw.total.waitlisted]
    for measure, value in _outcome(draw.total):
        yield ["draw", all_tiers, "", "", measure, value]
    for tier in draw.tiers:
        yield ["draw", tier.name, "", "", "in_list", tier.registrations]
        yield ["draw", tier.name, "", "", "winners", tier.winners]
        yield ["draw", tier.name, "", "", "waitlisted", tier.waitlist]
        for measure, value in _outcome(tier.counts):
            yield ["draw", tier.name, "", "", measure, value]


def _cell(value: object) -> object:
    # Empty, not "None", for a figure that has no value (no quotes, nobody admitted).
    return "" if value is None else value


def report_rows(report: SaleReport) -> Iterator[list[object]]:
    yield COLUMNS
    yield [
        "about",
        "",
        report.span[0].isoformat() if report.span else "",
        report.span[1].isoformat() if report.span else "",
        "state",
        report.state.value,
    ]
    yield ["about", "", "", "", "generated_at", report.generated_at.isoformat()]
    if report.sold_out is not None:
        yield ["about", "", "", "", "sold_out_at", report.sold_out.at.isoformat()]
        yield ["about", "", "", "", "sold_out_by", report.sold_out.by]
    for tier in (report.overall, *report.tiers):
        for measure, value in _figures(tier):
            yield ["figure", tier.name, "", "", measure, _cell(value)]
    if report.scale is not None:
        step = timedelta(seconds=report.scale.seconds)
        for start, bucket in zip(report.bucket_starts(), report.buckets, strict=True):
            span = [start.isoformat(), (start + step).isoformat()]
            yield ["timeline", report.overall.name, *span, "arrivals", bucket.arrivals]
            yield ["timeline", report.overall.name, *span, "admissions", bucket.admissions]
            yield ["timeline", report.overall.name, *span, "waiting_at_end", bucket.waiting]
    width = report.wait_bin_seconds
    for tier in report.tiers:
        if not tier.figures.admitted:
            continue
        for index, count in enumerate(tier.histogram):
            yield ["wait_histogram", tier.name, index * width, (index + 1) * width, "fans", count]
    if report.draw is not None:
        yield from _draw_rows(report.draw, all_tiers=report.overall.name)


# A spreadsheet runs a cell that starts with one of these as a formula (``=HYPERLINK(...)``,
# ``@SUM(...)``); a tier's name is staff's free text and auditors open this file.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """A text cell a spreadsheet shows as text: one that would start a formula gets a leading
    apostrophe (OWASP's advice). Numbers stay numbers, negative ones included."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def report_csv(report: SaleReport) -> str:
    out = io.StringIO()
    csv.writer(out).writerows([spreadsheet_safe(c) for c in row] for row in report_rows(report))
    return out.getvalue()
