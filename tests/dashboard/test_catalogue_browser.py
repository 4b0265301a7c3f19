"""The catalogue in a real browser: tabs, search, pages, and figures refreshed in place.

Against pytest-django's live server (this process, the test database), not the process stack:
the catalogue is plain Django pages and one JSON endpoint.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from events.models import Event
from queueing.beat import event_tick
from staff.services import event_pause
from tests.browser import chromium
from tests.events.bulk import bulk_events, spread
from tests.helpers import staff_user
from tests.http import request
from tests.processes import ROOT, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def rows(page) -> list[str]:
    return page.eval_on_selector_all(
        "#catalogue tbody tr", "rows => rows.map(r => r.dataset.event)"
    )


def test_staff_browse_search_and_page_the_catalogue(live_server, make_event, tmp_path: Path):
    staff_user("ann", "view_event", password="a-long-pass-123")
    now = timezone.now()
    hour = timedelta(hours=1)
    bulk_events(spread(90, now=now))  # 30 live (open an hour ago), 30 upcoming, 30 ended
    arena = make_event(slug="arena-tour", capacity=2, rate_per_minute=0, starts_at=now - 2 * hour)
    club = make_event(slug="club-night", starts_at=now - 1.5 * hour)
    event_pause(event=club, actor="test", now=now)
    make_event(slug="summer-fest", prequeue_opens_at=now - hour / 2, starts_at=now + hour)
    for slug, name in (("arena-tour", "Arena Tour"), ("club-night", "Club Night")):
        Event.objects.filter(slug=slug).update(name=name)
    base = live_server.url
    for _ in range(5):
        request("POST", f"{base}/api/v1/events/arena-tour/join", {})
    event_tick(event_id=arena.id, now=timezone.now())  # two are let in: the capacity

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1100, "height": 620})
        page.goto(f"{base}/admin/login/?next=/dashboard/")
        page.fill("#id_username", "ann")
        page.fill("#id_password", "a-long-pass-123")
        page.click("input[type=submit]")
        page.wait_for_selector("#catalogue")
        # Live first (fans are in those rooms), in order of admission start.
        assert page.get_attribute("#tab-live", "aria-current") == "page"
        assert page.inner_text("[data-count=live]") == "33"
        assert rows(page)[:2] == ["arena-tour", "club-night"] and len(rows(page)) == 25
        arena_row = 'tr[data-event="arena-tour"]'
        assert page.inner_text(f"{arena_row} [data-fig=waiting]") == "3"
        assert page.inner_text(f"{arena_row} [data-fig=active]") == "2"

        page.click("a[rel=next]")
        page.wait_for_selector('a[aria-label="Page 2"][aria-current=page]')
        assert len(rows(page)) == 8 and rows(page)[-1] == "summer-fest"

        page.click("#tab-upcoming")
        page.wait_for_selector("#tab-upcoming[aria-current=page]")
        assert "Queue opens" in page.inner_text("#catalogue thead")

        page.fill("#catalogue-q", "ARENA")
        page.press("#catalogue-q", "Enter")
        page.wait_for_selector("#tab-live[aria-current=page]")  # where the match is
        assert rows(page) == ["arena-tour"]
        # Two more fans join: the row's figure follows without a reload.
        for _ in range(2):
            request("POST", f"{base}/api/v1/events/arena-tour/join", {})
        wait_until(
            lambda: page.inner_text(f"{arena_row} [data-fig=waiting]") == "5",
            timeout=15,
            what="the waiting figure to refresh in place",
        )

        page.goto(f"{base}/dashboard/")
        page.wait_for_selector("#catalogue")
        shot = (
            (ROOT / "docs" / "catalogue.png")
            if os.environ.get("WR_SAVE_SCREENSHOTS")
            else tmp_path / "catalogue.png"
        )
        page.screenshot(path=str(shot))  # the top of the list: what staff see first
    assert shot.stat().st_size > 10_000
