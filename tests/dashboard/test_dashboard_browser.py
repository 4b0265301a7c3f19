"""The staff dashboard in a real browser, against the real processes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from events.models import Event, EventControl
from tests.browser import chromium
from tests.helpers import staff_user
from tests.http import request
from tests.processes import ROOT, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def test_staff_watch_figures_change_and_pause_from_the_page(make_event, tmp_path: Path) -> None:
    # Hashed the way the server process (production settings) can check it.
    ann = staff_user("ann", "change_event", password=None)
    get_user_model().objects.filter(pk=ann.pk).update(
        password=make_password("a-long-pass-123", hasher="pbkdf2_sha256")
    )
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
            page.once("dialog", lambda dialog: dialog.accept())
            page.click("#pause")
            page.wait_for_selector("text=pause done")
            wait_until(
                lambda: page.text_content("#fig-state") == "paused",
                timeout=5,
                what="the page to show the pause",
            )
    assert Event.objects.get(pk=event.pk).control == EventControl.PAUSED
