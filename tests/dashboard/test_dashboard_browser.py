"""The staff dashboard in a real browser, against the real processes."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection

from events.models import Event, EventControl
from queueing.models import QueueEntry
from tests.browser import chromium, screenshot
from tests.helpers import staff_user, waiting_entries
from tests.http import request
from tests.processes import ROOT, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def staff_who_may_steer() -> None:
    """Ann, with her password hashed the way the server process (production settings) checks."""
    ann = staff_user("ann", "change_event", password=None)
    get_user_model().objects.filter(pk=ann.pk).update(
        password=make_password("a-long-pass-123", hasher="pbkdf2_sha256")
    )


def test_staff_watch_figures_change_and_pause_from_the_page(make_event, tmp_path: Path) -> None:
    staff_who_may_steer()
    event = make_event(slug="arena", capacity=2, rate_per_minute=30, heartbeat_seconds=600)
    with running_stack() as stack:
        base = stack.web()
        stack.worker()
        stack.beat()
        for _ in range(3):
            request("POST", f"{base}/api/v1/events/arena/join", {})
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"{base}/admin/login/?next=/dashboard/events/arena/")
            page.fill("#id_username", "ann")
            page.fill("#id_password", "a-long-pass-123")
            page.click("input[type=submit]")
            page.wait_for_selector("#fig-waiting")
            before = int(page.inner_text("#fig-arrivals"))
            for _ in range(4):
                request("POST", f"{base}/api/v1/events/arena/join", {})
            # Updated in place, without a reload.
            # (Polled from here: the page's CSP rightly forbids the eval a page-side wait needs.)
            wait_until(
                lambda: int(page.text_content("#fig-arrivals")) >= before + 4,
                timeout=10,
                what="the figures to update in place",
            )
            assert int(page.inner_text("#fig-active")) >= 1
            shot = (
                (ROOT / "docs" / "dashboard.png")
                if os.environ.get("WR_SAVE_SCREENSHOTS")
                else tmp_path / "dashboard.png"
            )
            page.screenshot(path=str(shot), full_page=True)
            page.click("#pause")  # no script dialog: a confirmation page, in words
            assert "Nobody new goes to the shop until you resume." in page.inner_text("main")
            page.click("#confirm")
            page.wait_for_selector("text=On-sale arena: paused.")
            wait_until(
                lambda: page.text_content("#fig-state") == "paused",
                timeout=5,
                what="the page to show the pause",
            )
    assert Event.objects.get(pk=event.pk).control == EventControl.PAUSED


def entries(**filters: object) -> int:
    """Queue entries counted off Playwright's event loop (Django's ORM refuses to run on one)."""

    def count() -> int:
        try:
            return QueueEntry.objects.filter(**filters).count()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(count).result()


def fits(page, width: int = 390) -> None:
    """No sideways scroll of the page itself (a table may scroll inside its own box)."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url


def test_on_a_phone_staff_lift_the_cap_and_close_a_line_through_confirmations(
    make_event, tmp_path: Path
) -> None:
    staff_who_may_steer()
    event = make_event(slug="arena", capacity=5, rate_per_minute=30, heartbeat_seconds=600)
    waiting_entries(event, event.tiers.get(), 1234)
    with running_stack() as stack:
        base = stack.web()
        stack.worker()
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 390, "height": 844})
            page.goto(f"{base}/admin/login/?next=/dashboard/")
            page.fill("#id_username", "ann")
            page.fill("#id_password", "a-long-pass-123")
            page.click("input[type=submit]")
            page.wait_for_selector("#catalogue")
            fits(page)
            screenshot(page, "catalogue-390.png", tmp_path)
            page.click("text=On-sale arena")
            page.wait_for_selector("#controls")
            fits(page)
            screenshot(page, "event-390.png", tmp_path)
            # "No cap" is a box to tick; the confirmation says what it means.
            page.check("#capacity-no-cap")
            page.click("#set-capacity")
            said = page.inner_text("#confirmation")
            assert "No cap: fans will be let in at the pace only (30 a minute)" in said
            assert "To stop letting fans in, pause the on-sale instead." in said
            fits(page)
            screenshot(page, "confirm-no-cap-390.png", tmp_path)
            page.click("#confirm")
            page.wait_for_selector("text=On-sale arena: no cap (pace only).")
            assert page.inner_text("#fig-capacity") == "No cap"
            # Closing names the fans it sends home, and does so once confirmed.
            page.click("#close")
            said = page.inner_text("#confirmation")
            assert "Close: the 1,234 fans still in line are sent home" in said
            screenshot(page, "confirm-close-390.png", tmp_path)
            assert entries(event_id=event.pk, status="revoked") == 0
            stack.beat()
            page.click("#confirm")
            page.wait_for_selector("text=On-sale arena: closed.")
            wait_until(
                lambda: entries(event_id=event.pk, status="revoked") == 1234,
                timeout=30,
                what="the fans in line to be sent home",
            )
            page.reload()
            assert page.query_selector("#controls") is None
            assert "nothing left to steer" in page.inner_text("#no-controls")
            assert page.query_selector("#fig-wait") is None
            fits(page)
            screenshot(page, "event-closed-390.png", tmp_path)
    event.refresh_from_db()
    assert (event.control, event.capacity) == (EventControl.CLOSED, 0)
