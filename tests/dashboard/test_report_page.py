"""The report after the sale (/dashboard/events/{slug}/report): its figures against a
hand-built history, its CSV, its print layout, who may see it, and what it costs."""

from __future__ import annotations

import csv
import hashlib
import io
import re
import xml.etree.ElementTree as ET
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.sale_report import sale_report
from queueing.models import QueueEntry
from staff.services import TierSpec
from tests.dashboard.report_history import FANS, T, build_history, in_line
from tests.helpers import AUDITOR, fans_join, staff_client

pytestmark = pytest.mark.django_db

SVG = re.compile(r"<svg\b.*?</svg>", re.S)


@pytest.fixture
def staff() -> Client:
    return staff_client("ann", "view_event")


def figures(report, tier: str = "All tiers"):
    found = [t for t in (report.overall, *report.tiers) if t.name == tier]
    return found[0]


def test_the_figures_follow_the_history(make_event) -> None:
    event = build_history(make_event)
    report = sale_report(event, now=timezone.now())
    overall = report.overall.figures
    assert not report.running
    assert (overall.joined, overall.admitted, overall.still_waiting) == (9, 6, 0)
    assert (overall.left_line, overall.expired_line, overall.revoked_line) == (1, 1, 1)
    assert (overall.completed, overall.abandoned_sessions, overall.expired_sessions) == (4, 1, 1)
    assert overall.reentered == 1
    # Waits 20, 30, 60, 80, 120, 155 (g6 by its first admission, from the trail).
    assert (overall.wait_p10, overall.wait_p50, overall.wait_p90) == (20, 60, 155)
    assert overall.wait_max == 155
    # Inside the quote: g1, g2, g6, m1; longer: g3, m2. |wait - p50|: 0 30 60 5 0 20.
    assert (overall.quoted, overall.inside_quote, overall.under_quote) == (6, 4, 0)
    assert overall.over_quote == 2
    assert report.overall.coverage == pytest.approx(4 / 6)
    assert overall.median_abs_error == pytest.approx(12.5)
    assert report.overall.abandonment_rate == pytest.approx(2 / 9)
    assert report.overall.reentry_rate == pytest.approx(1 / 6)

    general = figures(report, "General")
    assert (general.figures.joined, general.figures.admitted) == (7, 4)
    assert (general.figures.wait_p10, general.figures.wait_p50) == (60, 80)
    assert (general.figures.wait_p90, general.figures.wait_max) == (155, 155)
    assert general.coverage == pytest.approx(3 / 4)
    assert general.figures.median_abs_error == pytest.approx(17.5)
    members = figures(report, "Members")
    assert (members.figures.joined, members.figures.admitted, members.coverage) == (2, 2, 0.5)

    # Fairness: General let in g1, g3, g2, g6: one pair out of order; Members kept order.
    assert (general.fairness.order_inversions, general.fairness.kendall_tau) == (
        1,
        pytest.approx(2 / 3),
    )
    assert (members.fairness.order_inversions, members.fairness.kendall_tau) == (0, 1)
    assert report.fairness.kendall_tau == pytest.approx(1 - 2 / 7)


def test_the_series_over_time_follow_the_history(make_event) -> None:
    event = build_history(make_event)
    report = sale_report(event, now=timezone.now())
    # 600 s from the first join to the close: 10 s buckets from T.
    assert (report.scale.origin, report.scale.seconds, report.scale.count) == (T, 10, 61)
    arrivals = [0] * 61
    admissions = [0] * 61
    for fan in FANS:
        arrivals[fan.joined // 10] += 1
        first = fan.first_admitted if fan.reentered is not None else fan.admitted
        if first is not None:
            admissions[first // 10] += 1
    assert [b.arrivals for b in report.buckets] == arrivals
    assert [b.admissions for b in report.buckets] == admissions
    assert [b.waiting for b in report.buckets] == [in_line(10 * (i + 1)) for i in range(61)]
    assert max(b.waiting for b in report.buckets) == 6
    assert report.buckets[-1].waiting == 0


def test_wait_histograms_per_tier(make_event) -> None:
    event = build_history(make_event)
    report = sale_report(event, now=timezone.now())
    # The longest wait is 155 s: 5 s bins, 32 of them.
    assert report.wait_bin_seconds == 5
    general, members = figures(report, "General"), figures(report, "Members")
    assert len(general.histogram) == 32
    assert {i: n for i, n in enumerate(general.histogram) if n} == {12: 1, 16: 1, 24: 1, 31: 1}
    assert {i: n for i, n in enumerate(members.histogram) if n} == {4: 1, 6: 1}
    assert report.overall.histogram == [
        a + b for a, b in zip(general.histogram, members.histogram, strict=True)
    ]


def test_the_page_agrees_with_the_auditors_json_report(make_event) -> None:
    event = build_history(make_event)
    report = sale_report(event, now=timezone.now())
    api = staff_client("x", api=True)
    json_report = api.get(f"/api/v1/audit/events/{event.slug}/report").json()
    assert json_report["joined"] == report.overall.figures.joined
    assert json_report["admitted"] == report.overall.figures.admitted
    assert json_report["eta_p10_p90_coverage"] == pytest.approx(report.overall.coverage)
    assert json_report["eta_median_abs_error_s"] == pytest.approx(
        report.overall.figures.median_abs_error
    )
    assert json_report["abandonment_rate"] == pytest.approx(report.overall.abandonment_rate)
    assert json_report["wait_s"]["p50"] == report.overall.figures.wait_p50
    assert json_report["kendall_tau"] == pytest.approx(report.fairness.kendall_tau)


def test_the_page_shows_the_report_with_valid_accessible_charts(staff, make_event) -> None:
    event = build_history(make_event)
    page = staff.get(f"/dashboard/events/{event.slug}/report")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="fig-joined">9<' in html and 'id="fig-coverage">66.7 %<' in html
    assert 'id="fig-wait">1 min / 2 min 35 s<' in html
    assert "report-running" not in html  # closed: the whole story
    charts = SVG.findall(html)
    # Three over time, the histogram of all tiers and one per tier.
    assert len(charts) == 6
    for chart in charts:
        root = ET.fromstring(chart)
        assert root.get("role") == "img" and root.get("aria-label")
        assert root.find("{http://www.w3.org/2000/svg}title").text == root.get("aria-label")
        assert root.find("{http://www.w3.org/2000/svg}desc").text
    assert "Fans in line" in charts[0] and "18:00:00" in charts[0]
    # Tables per tier with the total of all tiers.
    assert html.count("<tfoot>") == 4
    assert "Sent home at close" in html
    # Linked from the on-sale's page.
    assert (
        f'href="/dashboard/events/{event.slug}/report"'
        in staff.get(f"/dashboard/events/{event.slug}/").content.decode()
    )


def test_the_csv_holds_the_figures_series_and_histograms(staff, make_event) -> None:
    event = build_history(make_event)
    response = staff.get(f"/dashboard/events/{event.slug}/report.csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert re.fullmatch(
        r'attachment; filename="report-arena-\d{8}-\d{6}\.csv"', response["Content-Disposition"]
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert list(rows[0]) == ["section", "tier", "from", "to", "measure", "value"]
    figure = {(r["tier"], r["measure"]): r["value"] for r in rows if r["section"] == "figure"}
    assert figure["All tiers", "joined"] == "9"
    assert float(figure["All tiers", "quote_coverage"]) == pytest.approx(4 / 6)
    assert figure["General", "order_inversions"] == "1"
    assert figure["Members", "wait_p50_s"] == "20.0"
    timeline = [r for r in rows if r["section"] == "timeline"]
    assert len(timeline) == 61 * 3
    first = [r for r in timeline if r["from"] == T.isoformat()]
    assert {r["measure"]: r["value"] for r in first} == {
        "arrivals": "2",
        "admissions": "0",
        "waiting_at_end": "2",
    }
    bins = [r for r in rows if r["section"] == "wait_histogram" and r["value"] != "0"]
    assert [(r["tier"], r["from"], r["to"]) for r in bins if r["tier"] == "Members"] == [
        ("Members", "20", "25"),
        ("Members", "30", "35"),
    ]


def test_the_printable_view_needs_no_script(staff, make_event) -> None:
    event = build_history(make_event)
    screen = staff.get(f"/dashboard/events/{event.slug}/report").content.decode()
    assert f'href="/dashboard/events/{event.slug}/report?print=1"' in screen
    response = staff.get(f"/dashboard/events/{event.slug}/report", {"print": "1"})
    html = response.content.decode()
    assert 'class="report-page print-layout"' in html
    assert "<header>" not in html and "Back to the report" in html
    # Scripts only from the room itself, none inline: the CSP allows no other.
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    css = Path(finders.find("dashboard/report.css")).read_text()
    assert "@media print" in css and "size: A4" in css


def test_who_may_read_the_report(make_event) -> None:
    event = build_history(make_event)
    for path in (
        f"/dashboard/events/{event.slug}/report",
        f"/dashboard/events/{event.slug}/report.csv",
    ):
        anonymous = Client().get(path)
        assert anonymous.status_code == 302
        assert anonymous["Location"].startswith("/dashboard/sign-in/?next=")
        assert staff_client(f"fan-{len(path)}", staff=False).get(path).status_code == 403
        assert staff_client(f"audrey-{len(path)}", **AUDITOR).get(path).status_code == 200
        assert staff_client(f"sam-{len(path)}").get(path).status_code == 200
    assert staff_client("stan").get("/dashboard/events/nope/report").status_code == 404
    audra = staff_client("audra", **AUDITOR)
    assert audra.head(f"/dashboard/events/{event.slug}/report").status_code == 200
    assert audra.post(f"/dashboard/events/{event.slug}/report").status_code == 405


def test_a_running_on_sale_is_reported_so_far(staff, make_event) -> None:
    make_event(slug="live")
    fans_join("live", 3)
    html = staff.get("/dashboard/events/live/report").content.decode()
    assert 'id="report-running"' in html and "still open" in html
    assert 'id="fig-still-waiting">3<' in html
    # Nobody let in, nobody quoted yet: dashes, not zeros or errors.
    assert 'id="fig-wait">— / —<' in html and 'id="fig-tau">—<' in html
    assert "Nobody has been let in yet" in html
    assert "<tfoot>" not in html  # one tier: no total row


def test_an_on_sale_nobody_joined(staff, make_event) -> None:
    make_event(slug="quiet")
    response = staff.get("/dashboard/events/quiet/report")
    assert response.status_code == 200
    assert "Nobody joined this on-sale yet" in response.content.decode()
    assert "<svg" not in response.content.decode()
    rows = list(csv.reader(io.StringIO(staff.get("/dashboard/events/quiet/report.csv").text)))
    assert ["figure", "All tiers", "", "", "joined", "0"] in rows
    assert ["figure", "All tiers", "", "", "quote_coverage", ""] in rows


def test_fans_without_quotes_show_no_coverage(staff, make_event) -> None:
    event = build_history(make_event)
    QueueEntry.objects.filter(event=event).update(quoted_p10=None, quoted_p50=None, quoted_p90=None)
    html = staff.get(f"/dashboard/events/{event.slug}/report").content.decode()
    assert 'id="fig-coverage">—<' in html


def test_a_sale_spread_over_years_keeps_the_charts_small(staff, make_event) -> None:
    event = build_history(make_event)
    first_fan = hashlib.sha256(b"g1").hexdigest()
    QueueEntry.objects.filter(event=event, identity=first_fan).update(
        joined_at=T - timedelta(days=900)
    )
    report = sale_report(event, now=timezone.now())
    assert report.scale.count <= 120 and report.scale.seconds % 86400 == 0
    assert report.overall.figures.wait_max == pytest.approx(900 * 86400 + 60)
    assert len(report.overall.histogram) <= 40
    assert staff.get(f"/dashboard/events/{event.slug}/report").status_code == 200


def test_a_page_costs_the_same_queries_for_ten_fans_or_a_thousand(make_event) -> None:
    """Aggregates in PostgreSQL: the number of queries does not grow with the fans (the
    fairness figures send one number per admitted fan, in one query: dashboard/reports.py)."""
    auditor = staff_client("audrey", **AUDITOR)
    event = build_history(make_event)
    with CaptureQueriesContext(connection) as few:
        assert auditor.get(f"/dashboard/events/{event.slug}/report").status_code == 200
    tier = QueueEntry.objects.filter(event=event).values_list("tier_id", flat=True).first()
    QueueEntry.objects.bulk_create(
        QueueEntry(
            event=event,
            tier_id=tier,
            identity=f"bulk-{i}",
            status="completed",
            joined_at=T + timedelta(seconds=i % 600),
            status_changed_at=T + timedelta(seconds=700),
            admitted_at=T + timedelta(seconds=i % 600 + 30),
            ended_at=T + timedelta(seconds=700),
            quoted_p10=10,
            quoted_p50=30,
            quoted_p90=60,
        )
        for i in range(1000)
    )
    with CaptureQueriesContext(connection) as many:
        assert auditor.get(f"/dashboard/events/{event.slug}/report").status_code == 200
        assert auditor.get(f"/dashboard/events/{event.slug}/report.csv").status_code == 200
    assert len(few) <= 12
    assert len(many) == 2 * len(few)


def test_the_csv_does_not_hand_a_spreadsheet_formulas(staff, make_event) -> None:
    """Tier names are staff's free text; a cell that would start a formula is kept as text
    (a leading apostrophe), so an auditor opening the file runs nothing."""
    names = ['=HYPERLINK("https://evil.example","x")', "@SUM(A1)", "+1", "-1", "\tTab", "\rCR"]
    make_event(slug="formulas", tiers=[TierSpec(name, priority=i) for i, name in enumerate(names)])
    fans_join("formulas", 2)
    text = staff.get("/dashboard/events/formulas/report.csv").text
    tiers = {row[1] for row in csv.reader(io.StringIO(text)) if row[0] == "figure"}
    assert tiers == {"All tiers", *("'" + name for name in names)}
    assert "=HYPERLINK" not in text.replace("'=HYPERLINK", "")
