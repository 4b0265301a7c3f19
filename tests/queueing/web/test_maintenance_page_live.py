"""Maintenance on an open waiting page, live, in a real browser against the real processes: the
page's first line and its wait say it, with staff's message, when staff switch to maintenance;
the fan keeps their place; and both go back when staff switch back. (A fan in line hears of
maintenance in the first line, never in a second notice: rules/wording.py.)"""

from __future__ import annotations

import pytest

from tests.browser import chromium
from tests.helpers import staff_token
from tests.http import request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


WAIT_KIND_IS = "kind => document.getElementById('wait').dataset.kind === kind"
WAIT_KIND_IS_NOT = "kind => document.getElementById('wait').dataset.kind !== kind"


def steer(base: str, token: str, **changes: str) -> None:
    """Through the staff API, as staff would (the browser's event loop runs in this thread:
    no database calls from here)."""
    reply = request(
        "PATCH",
        f"{base}/api/v1/manage/events/fix/",
        changes,
        {"Authorization": f"Token {token}"},
    )
    assert reply.status == 200, reply.body


def test_the_notice_comes_and_goes_with_the_mode_without_a_reload(make_event) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="fix", capacity=1, rate_per_minute=0, heartbeat_seconds=600)
        token = staff_token("ann", superuser=True)
        stack.worker()
        stack.beat()
        # Someone in the shop already: the page's fan waits, first in line.
        first = request("POST", f"{base}/api/v1/events/fix/join", {}).body["ticket"]
        wait_until(
            lambda: request("GET", f"{base}/api/v1/tickets/{first}").body["status"] == "admitted",
            timeout=20,
            what="the first fan to be let in",
        )
        with chromium() as browser:
            page = browser.new_page(locale="en-US")
            page.goto(f"{base}/e/fix/")
            page.wait_for_selector("#position")
            assert "maintenance" not in page.inner_text("#status-text")
            page.evaluate("window.notReloaded = true")

            steer(base, token, mode="maintenance", message="<b>Back</b> at nine.")
            page.wait_for_function(WAIT_KIND_IS, arg="maintenance", timeout=10_000)
            assert "paused for maintenance" in page.inner_text("#status-text")
            assert page.locator("#maintenance").count() == 0  # one message, not two
            assert page.inner_text("#staff-message-body") == "<b>Back</b> at nine."
            assert page.locator("#staff-message-body b").count() == 0  # text, never markup
            assert page.inner_text("#position") == "1"

            steer(base, token, mode="queue")
            page.wait_for_function(WAIT_KIND_IS_NOT, arg="maintenance", timeout=10_000)
            assert "maintenance" not in page.inner_text("#status-text")
            assert page.evaluate("window.notReloaded") is True
