"""The staff's API reference in a real browser, against the real processes: it must draw and
call the API under the room's Content-Security-Policy (scripts from 'self' only)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from tests.browser import chromium, screenshot, watch_errors
from tests.helpers import staff_user
from tests.processes import running_stack

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def test_staff_sign_in_read_the_reference_and_try_a_call(make_event, tmp_path: Path) -> None:
    ann = staff_user("ann", "view_event", password=None)
    # Hashed the way the server process (production settings) checks.
    get_user_model().objects.filter(pk=ann.pk).update(
        password=make_password("a-long-pass-123", hasher="pbkdf2_sha256")
    )
    make_event(slug="arena")
    with running_stack() as stack:
        base = stack.web()
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            watch_errors(page, errors)
            page.goto(f"{base}/api/v1/docs/")
            # Not signed in: the dashboard's sign-in, which brings the reader back.
            assert "/dashboard/sign-in/" in page.url
            page.fill("#id_username", "ann")
            page.fill("#id_password", "a-long-pass-123")
            page.click("button[type=submit]")
            page.wait_for_selector("#operations-fans-join", timeout=20_000)
            for operation in (
                "#operations-fans-challenge",
                "#operations-operations-metrics",
                "#operations-manage-manage_event_admit_now",
                "#operations-manage-manage_events_list",
            ):
                assert page.locator(operation).count() == 1, operation
            screenshot(page, "api-reference.png", tmp_path)
            # "Try it out" calls the API with the reader's own session.
            listing = "#operations-manage-manage_events_list"
            page.click(f"{listing} .opblock-summary")
            page.click(f"{listing} .try-out__btn")
            page.click(f"{listing} .execute")
            answer = page.locator(f"{listing} .live-responses-table tbody .response-col_status")
            answer.first.wait_for(timeout=10_000)
            assert answer.first.inner_text().strip().startswith("200")
            assert '"slug": "arena"' in page.inner_text(f"{listing} .live-responses-table")
            screenshot(page, "api-reference-try.png", tmp_path)
    # No script refused by the policy, no failed load.
    assert errors == []
