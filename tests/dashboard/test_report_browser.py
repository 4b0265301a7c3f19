"""The report after the sale in a real browser: on screen, printed (print media and a PDF)
and as CSV, for a sale of three thousand fans in three tiers.

Against pytest-django's live server (this process, the test database): the report is a
plain Django page.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import chromium, watch_errors
from tests.dashboard.report_history import realistic_history
from tests.helpers import AUDITOR, staff_user
from tests.processes import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("WR_REPORT_SHOTS", "/work/helpers/shots/report"))
DOCS_SHOT = ROOT / "docs" / "report.png"


def shot_path(name: str, tmp_path: Path) -> Path:
    """Under /work/helpers/shots/report/ where that exists (to be looked at), else the test's."""
    target = SHOTS if SHOTS.parent.exists() else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    return target / name


def test_an_auditor_reads_prints_and_downloads_the_report(
    live_server, make_event, tmp_path: Path
) -> None:
    realistic_history(make_event, fans=3000)
    staff_user("ann", "view_event", password="a-long-pass-123")
    staff_user("audrey", password="a-long-pass-123", **AUDITOR)
    base = live_server.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        # The admin login asks for favicon.ico, which the room does not serve.
        watch_errors(page, errors, expected=lambda r: r.url.endswith("/favicon.ico"))
        page.goto(f"{base}/admin/login/?next=/dashboard/events/summer-tour/")
        page.fill("#id_username", "ann")
        page.fill("#id_password", "a-long-pass-123")
        page.click("input[type=submit]")
        page.click("#report-link")
        page.wait_for_selector("#fig-joined")
        assert page.inner_text("#fig-joined") == "3,000"
        assert page.is_visible("#report-print")  # the script ran: CSP allows 'self'
        assert page.locator("svg.report-chart").count() == 7  # 3 over time, all tiers, 3 tiers
        assert page.get_attribute("#chart-waiting svg", "aria-label") == (
            "Fans waiting in line over time"
        )
        page.screenshot(path=str(shot_path("report-screen.png", tmp_path)), full_page=True)
        if os.environ.get("WR_SAVE_SCREENSHOTS"):
            page.screenshot(path=str(DOCS_SHOT), full_page=False)

        with page.expect_download() as download:
            page.click("#report-csv")
        saved = tmp_path / download.value.suggested_filename
        download.value.save_as(saved)
        assert saved.name.startswith("report-summer-tour-") and saved.suffix == ".csv"
        assert saved.read_text().startswith("section,tier,from,to,measure,value")

        # Printed: no navigation, no buttons; the charts fit the page's width.
        page.emulate_media(media="print")
        assert not page.is_visible("header") and not page.is_visible(".report-actions")
        page.set_viewport_size({"width": 794, "height": 1123})  # A4 at 96 dpi
        page.screenshot(path=str(shot_path("report-print-media.png", tmp_path)), full_page=True)
        widths = page.eval_on_selector_all(
            "svg.report-chart", "charts => charts.map(c => c.getBoundingClientRect().right)"
        )
        assert max(widths) <= 794
        assert page.evaluate("document.documentElement.scrollWidth") <= 794  # tables too
        pdf = shot_path("report.pdf", tmp_path)
        page.pdf(path=str(pdf), format="A4", print_background=False)
        assert pdf.read_bytes().startswith(b"%PDF")
        page.emulate_media(media="screen")

        # The printable view works without a script.
        page.set_viewport_size({"width": 1200, "height": 900})
        page.click("#report-printable")
        page.wait_for_selector("body.print-layout")
        assert not page.is_visible("header")
        page.screenshot(path=str(shot_path("report-printable-view.png", tmp_path)), full_page=True)

        # An auditor who is not staff reads it too, here on a phone.
        phone = browser.new_context(viewport={"width": 390, "height": 844})
        auditor_page = phone.new_page()
        auditor_page.goto(f"{base}/dashboard/events/summer-tour/report")
        # Not signed in: the dashboard's sign-in, which admits auditors who are not staff.
        assert "/dashboard/sign-in/" in auditor_page.url
        auditor_page.fill("#id_username", "audrey")
        auditor_page.fill("#id_password", "a-long-pass-123")
        auditor_page.click("button[type=submit]")
        auditor_page.wait_for_selector("#fig-joined")
        assert auditor_page.evaluate("document.documentElement.scrollWidth") <= 390
        auditor_page.screenshot(
            path=str(shot_path("report-auditor-phone.png", tmp_path)), full_page=True
        )
        phone.close()
        assert errors == []
