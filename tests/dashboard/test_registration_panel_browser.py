"""A draw on staff's pages in a real browser: the registration panel of an on-sale's page
(setting a window through its form, and the counts after a draw), the report's "Registration
and draw" and the draw's preview, on a desktop and on a phone.

Against pytest-django's live server (this process, the test database): plain Django pages.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from staff.services import TierSpec
from tests.browser import chromium, watch_errors
from tests.helpers import invitations_settled, registration_drawn, staff_user

pytestmark = pytest.mark.django_db(transaction=True)


def shot(page, name: str, tmp_path: Path) -> Path:
    """In ``WR_SCREENSHOTS_DIR`` when set (to be looked at after the run), else the test's
    own folder."""
    folder = Path(os.environ.get("WR_SCREENSHOTS_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    page.screenshot(path=str(path), full_page=True)
    return path


def fits(page, width: int) -> None:
    """No sideways scroll of the page itself (a table may scroll inside its own box)."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url


def sign_in(page, base: str, next_url: str) -> None:
    page.goto(f"{base}/admin/login/?next={next_url}")
    page.fill("#id_username", "ann")
    page.fill("#id_password", "a-long-pass-123")
    page.click("input[type=submit]")


def test_staff_open_registration_and_read_a_draw_on_desktop_and_phone(
    live_server, make_event, tmp_path: Path
) -> None:
    staff_user("ann", "view_event", "change_event", password="a-long-pass-123")
    make_event(slug="spring")
    festival = make_event(
        slug="festival",
        tiers=[TierSpec(name="General"), TierSpec(name="Club", priority=1, access_codes=["C1"])],
    )
    window = registration_drawn(festival, by_mail=6, by_shop=6, winners=4, waitlist=3)
    invitations_settled(festival, used=2)
    base = live_server.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors: list[str] = []
        watch_errors(page, errors, expected=lambda r: r.url.endswith("/favicon.ico"))

        # An on-sale sold first come: staff open registration from its page.
        sign_in(page, base, "/dashboard/events/spring/")
        page.wait_for_selector("#registration-form")
        start = timezone.localtime(timezone.now() + timedelta(hours=2)).replace(minute=0)
        page.fill("#id_opens_at", start.strftime("%Y-%m-%dT%H:%M"))
        page.fill("#id_closes_at", (start + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M"))
        page.fill("#id_winners", "500")
        page.fill("#id_waitlist", "100")
        page.click("#set-registration")
        page.wait_for_selector("text=registration from")
        assert "not open yet" in page.inner_text("#registration-state")
        assert page.inner_text("#fig-registered") == "0"
        page.locator("#registration").scroll_into_view_if_needed()
        shot(page, "event-registration-set.png", tmp_path)

        # After a draw: counts by tier, the commitment and the seed; no form.
        page.goto(f"{base}/dashboard/events/festival/")
        page.wait_for_selector("#registration-draw")
        assert page.inner_text("#fig-registered") == "12"
        assert page.inner_text("#fig-winners-invited") == "4"
        assert page.inner_text("#fig-invitations-used") == "2"
        assert page.inner_text("#fig-invitations-lapsed") == "2"
        assert page.inner_text("#fig-waitlist-promoted") == "2"
        assert page.inner_text("#registration-list-root") == window.list_root
        assert page.locator("#registration-form").count() == 0
        shot(page, "event-registration-drawn.png", tmp_path)

        page.click("#report-link")
        page.wait_for_selector("#report-draw")
        assert page.inner_text("#report-list-root") == window.list_root
        assert page.inner_text("#report-draw-seed") == festival.draw_seed
        assert "python3 verify_draw.py draw.json" in page.inner_text("#report-verify-command")
        page.locator("#report-draw").scroll_into_view_if_needed()
        shot(page, "report-draw.png", tmp_path)

        page.goto(f"{base}/dashboard/events/festival/preview")
        page.wait_for_selector("#draw-preview-figures")
        page.fill("#id_draw-use_percent", "50")
        page.click("#run-draw-preview")
        page.wait_for_selector("#draw-preview-rounds")
        assert page.inner_text("#fig-draw-places") == "4"
        shot(page, "preview-draw.png", tmp_path)

        # On a phone: nothing wider than the screen.
        page.set_viewport_size({"width": 390, "height": 844})
        for url, ready, section, name in [
            ("/dashboard/events/festival/", "#registration-draw", "#registration", "event-390"),
            ("/dashboard/events/spring/", "#registration-form", "#registration", "form-390"),
            ("/dashboard/events/festival/report", "#report-draw", "#report-draw", "report-390"),
            (
                "/dashboard/events/festival/preview",
                "#draw-preview-figures",
                "#draw-preview",
                "preview-390",
            ),
        ]:
            page.goto(base + url)
            page.wait_for_selector(ready)
            fits(page, 390)
            shot(page, f"{name}.png", tmp_path)
            # The section alone, at the size a person reads it.
            folder = Path(os.environ.get("WR_SCREENSHOTS_DIR") or tmp_path)
            page.locator(section).screenshot(path=str(folder / f"{name}-section.png"))
        assert errors == []
