"""The preview of the line in a real browser: from the on-sale's dashboard page, trying
other settings, a refused value, and the admin's "Preview the line" with unsaved settings.

Against pytest-django's live server (this process, the test database): the preview is a
plain Django page.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Response

from events.models import Event
from tests.browser import chromium, screenshot, watch_errors
from tests.helpers import staff_user

pytestmark = pytest.mark.django_db(transaction=True)


def refused_value(response: Response) -> bool:
    """The preview's own 400 for a refused value: the page working."""
    return response.status == 400 and "/preview?" in response.url


def test_staff_preview_the_line_and_try_other_settings(
    live_server, make_event, tmp_path: Path
) -> None:
    event = make_event(slug="summer-tour", capacity=2000, rate_per_minute=3000, session_seconds=600)
    staff_user("ann", "view_event", "change_event", password="a-long-pass-123")
    base = live_server.url
    errors: list[str] = []
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        page = context.new_page()
        watch_errors(page, errors, expected=refused_value)
        page.goto(f"{base}/admin/login/?next=/dashboard/events/summer-tour/")
        page.fill("#id_username", "ann")
        page.fill("#id_password", "a-long-pass-123")
        page.click("input[type=submit]")
        page.click("#preview-link")
        page.wait_for_selector("#fig-last")
        # The on-sale's own settings and the example: 50,000 in the first 10 minutes into a
        # shop of 2,000 who stay five minutes on average (half the session).
        assert page.input_value("#id_capacity") == "2000"
        assert page.inner_text("#fig-fans") == "50,000"
        assert page.get_attribute("#preview-chart svg", "aria-label") == (
            "Expected fans in line over time"
        )
        first_last = page.inner_text("#fig-last")
        assert "h" in first_last  # hours, at 463 a minute

        # A pre-queue, a trickle after, one in twenty giving up, and a bigger shop.
        page.fill("#id_capacity", "5000")
        page.fill("#id_prequeue_fans", "8000")
        page.fill("#id_tail_per_minute", "100")
        page.fill("#id_abandon_percent", "5")
        page.click("#run-preview")
        page.wait_for_url("**/preview?*capacity=5000*")
        assert page.inner_text("#fig-fans") == "55,100"
        assert page.inner_text("#fig-last") != first_last
        assert page.evaluate("document.documentElement.scrollWidth") <= 1200
        screenshot(page, "preview.png", tmp_path, kept=True)

        # A value out of range: the form says so, nothing is simulated.
        page.fill("#id_rate_per_minute", "-3")
        page.click("#run-preview")
        page.wait_for_selector(".message.error")
        assert "greater than or equal to 0" in page.inner_text("#preview-form")
        assert page.locator("#fig-last").count() == 0
        screenshot(page, "preview-refused.png", tmp_path)

        # The admin: unsaved settings go to the preview, in a new tab, and stay unsaved.
        page.goto(f"{base}/admin/events/event/{event.pk}/change/")
        page.fill("#id_capacity", "123")
        with context.expect_page() as opened:
            page.click("#line-preview-link")
        preview = opened.value
        watch_errors(preview, errors)
        preview.wait_for_selector("#fig-last")
        assert preview.input_value("#id_capacity") == "123"
        assert preview.input_value("#id_rate_per_minute") == "3000"
        assert "csrfmiddlewaretoken" not in preview.url
    assert errors == []
    assert Event.objects.get(pk=event.pk).capacity == 2000
