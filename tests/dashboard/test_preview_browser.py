"""The preview of an on-sale's line in a real browser: staff sign in, open it from the
on-sale's page, try a faster rate, and see the figures and chart change (nothing saved)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from tests.browser import chromium, screenshot

pytestmark = pytest.mark.django_db(transaction=True)


def test_staff_preview_a_sale_and_try_a_faster_rate(live_server, make_event, tmp_path) -> None:
    event = make_event(slug="arena", capacity=2000, rate_per_minute=3000, session_seconds=600)
    get_user_model().objects.create_user("ann", password="a-long-pass-123", is_staff=True)
    base = live_server.url
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{base}/admin/login/?next=/dashboard/events/arena/")
        page.fill("#id_username", "ann")
        page.fill("#id_password", "a-long-pass-123")
        page.click("input[type=submit]")
        page.click("#preview-link")
        page.wait_for_selector("#preview-chart svg")
        slow_last = page.inner_text("#fig-last")
        assert page.input_value("#id_rate_per_minute") == "3000"
        assert page.is_visible("#preview-chart svg")

        page.fill("#id_rate_per_minute", "6000")
        page.fill("#id_capacity", "5000")
        page.click("#run-preview")
        page.wait_for_selector("#preview-chart svg")
        fast_last = page.inner_text("#fig-last")
        assert fast_last != slow_last
        assert "rate_per_minute=6000" in page.url
        shot = screenshot(page, "preview.png", Path(tmp_path), kept=True)
        assert shot.stat().st_size > 10_000
        assert errors == []
    event.refresh_from_db()
    assert (event.capacity, event.rate_per_minute) == (2000, 3000)
