"""The auditors' page in a real browser: an auditor signs in, lands on the list of on-sales
with each chain's verdict, verifies one, follows its links (report, records, their CSV) and
pages on.

Against pytest-django's live server (this process, the test database): plain Django pages.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from dashboard import audit_home
from dashboard.audit_verdicts import verdict_check
from events.models import Event
from queueing.beat import event_tick
from queueing.models import AuditRecord
from tests.browser import chromium, watch_errors
from tests.helpers import AUDITOR, fans_join, poll, shop_completes, staff_user

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = Path(os.environ.get("WR_AUDIT_SHOTS", "/work/shots/audittrail"))
PASSWORD = "a-long-pass-123"


def shot_path(name: str, tmp_path: Path) -> Path:
    """Under /work/shots/audittrail/ where /work exists (to be looked at), else the test's."""
    target = SHOTS if SHOTS.parent.parent.exists() else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    return target / name


def verdicts(page) -> dict[str, str]:
    return dict(
        page.eval_on_selector_all(
            "#audit tbody tr",
            "rows => rows.map(r => [r.dataset.event,"
            " r.querySelector('[data-verdict]').dataset.verdict])",
        )
    )


def a_few_sales(make_event) -> None:
    """Six on-sales, newest first: one never checked, one checked and then tampered with and
    checked again, one checked with newer records since, one sold and checked."""
    for slug in ("spring-gala", "winter-ball"):
        make_event(slug=slug)
    tour = make_event(slug="summer-tour", capacity=2, rate_per_minute=0)
    tickets = fans_join(tour.slug, 4)
    event_tick(event_id=tour.id, now=timezone.now())
    shop_completes(poll(tickets[0])["pass"], tour.integration_key)
    verdict_check(tour, now=timezone.now())
    arena = make_event(slug="arena-night")
    fans_join(arena.slug, 3)
    verdict_check(arena, now=timezone.now())
    fans_join(arena.slug, 2)  # newer than its verdict
    club = make_event(slug="club-night")
    fans_join(club.slug, 3)
    target = AuditRecord.objects.get(event=club, seq=4)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE queueing_auditrecord SET actor = 'nobody' WHERE id = %s", [target.id]
        )
    verdict_check(club, now=timezone.now())
    make_event(slug="autumn-fair")  # never checked
    for event in Event.objects.all():
        Event.objects.filter(pk=event.pk).update(name=event.slug.replace("-", " ").title())


def test_an_auditor_signs_in_and_audits(live_server, make_event, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(audit_home, "PER_PAGE", 5)
    a_few_sales(make_event)
    staff_user("audrey", password=PASSWORD, **AUDITOR)
    base = live_server.url
    with chromium() as browser:
        context = browser.new_context(
            viewport={"width": 1200, "height": 800}, accept_downloads=True
        )
        page = context.new_page()
        errors: list[str] = []
        watch_errors(page, errors)
        page.goto(f"{base}/dashboard/sign-in/")
        page.screenshot(path=str(shot_path("sign-in-en.png", tmp_path)), full_page=True)
        page.fill("#id_username", "audrey")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_selector("#audit")
        assert page.url == f"{base}/dashboard/audit/"
        assert verdicts(page) == {
            "autumn-fair": "none",
            "club-night": "broken",
            "arena-night": "ok",
            "summer-tour": "ok",
            "winter-ball": "none",
        }
        club = page.inner_text("tr[data-event=club-night] .verdict")
        assert "Broken at seq 4" in club and "its hash does not match its contents" in club
        assert "2 newer not checked yet" in page.inner_text("tr[data-event=arena-night] .verdict")

        # Verify now: the never-checked on-sale gets its verdict, with when it was made.
        page.click("tr[data-event=autumn-fair] button[value=last]")
        page.wait_for_selector("p.message")
        assert page.inner_text("p.message") == "Autumn Fair: intact, all 2 records."
        assert verdicts(page)["autumn-fair"] == "ok"
        assert "checked" in page.inner_text("tr[data-event=autumn-fair] .verdict")
        page.screenshot(path=str(shot_path("audit-en.png", tmp_path)), full_page=True)

        # The links work: the report page, the records (API, this on-sale's only), the exports.
        row = "tr[data-event=summer-tour]"
        page.click(f"{row} [data-link=report]")
        page.wait_for_selector("#fig-joined")
        assert page.inner_text("#fig-joined") == "4"
        page.go_back()
        page.click(f"{row} [data-link=records]")
        records = json.loads(page.inner_text("body"))["results"]
        assert {r["event"] for r in records} == {"summer-tour"}
        assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
        page.go_back()
        page.click(f"{row} [data-link=report-api]")
        assert json.loads(page.inner_text("body"))["joined"] == 4
        page.go_back()
        for link, starts in (("records-csv", "id,at,event,"), ("report-csv", "section,tier,")):
            with page.expect_download() as download:
                page.click(f"{row} [data-link={link}]")
            saved = tmp_path / download.value.suggested_filename
            download.value.save_as(saved)
            assert saved.read_text(encoding="utf-8").startswith(starts), link

        # The next page holds the oldest.
        page.click("a[rel=next]")
        page.wait_for_selector("#audit")
        assert list(verdicts(page)) == ["spring-gala"]
        assert errors == []

        # In Arabic: the dashboard's pages are for staff and auditors and are not translated
        # (as the rest of the dashboard), so the page is the same, left to right.
        arabic = browser.new_context(
            viewport={"width": 1200, "height": 800},
            locale="ar",
            storage_state=context.storage_state(),
        )
        page = arabic.new_page()
        page.goto(f"{base}/dashboard/audit/")
        page.wait_for_selector("#audit")
        assert page.get_attribute("html", "lang") == "en"
        page.screenshot(path=str(shot_path("audit-ar.png", tmp_path)), full_page=True)
