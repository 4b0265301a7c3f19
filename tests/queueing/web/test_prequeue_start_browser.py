"""The sale's start in a real browser against the real processes (web, worker, beat): a page
in the pre-queue becomes the waiting page where it is, at its shuffled place, without
reloading (the server sends its socket the place: queueing/web/consumers.py)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from staff.services import TierSpec
from tests.browser import chromium, screenshot, wait_for_true
from tests.helpers import staff_token
from tests.http import pass_complete, request
from tests.processes import running_stack

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def test_a_prequeue_page_becomes_the_waiting_page_in_place_at_the_start(
    make_event, tmp_path
) -> None:
    with running_stack() as stack:
        base = stack.web()
        # An hour away; staff bring it forward once the page waits in the pre-queue. The
        # page's own countdown then says an hour: only the server can tell it the sale began.
        starts = timezone.now() + timedelta(hours=1)
        # Room for one in the shop, who never leaves, and five fans of a tier served first:
        # one goes in, four wait ahead of the fan whose page this is.
        event = make_event(
            slug="start",
            starts_at=starts,
            capacity=1,
            rate_per_minute=0,
            tiers=[TierSpec("Fan club", priority=1, access_codes=["CLUB"]), TierSpec("General")],
        )
        club = [
            request("POST", f"{base}/api/v1/events/start/join", {"access_code": "CLUB"}).body[
                "ticket"
            ]
            for _ in range(5)
        ]
        token = staff_token("ann", superuser=True)
        stack.worker()
        stack.beat()
        with chromium() as browser:
            page = browser.new_page(locale="en-US")
            # This fan's clock is ten minutes fast: the countdown still says the server's.
            page.add_init_script(
                "const realNow = Date.now; Date.now = () => realNow() + 10 * 60 * 1000;"
            )
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(f"{base}/e/start/")
            page.click("form.join button[type=submit]")  # no code: the general tier
            page.wait_for_selector("#prequeue-part")
            assert page.locator("#waiting-part").is_hidden()
            assert page.inner_text("#status-text") == "You're in the pre-queue."
            assert page.inner_text("#countdown").startswith(("00:59:", "01:00:"))
            screenshot(page, "prequeue-before-start.png", tmp_path)
            page.evaluate("window.notReloaded = true")
            time.sleep(1.0)  # the page's socket opens
            moved = request(
                "PATCH",
                f"{base}/api/v1/manage/events/start/",
                {"starts_at": timezone.now().isoformat()},
                {"Authorization": f"Token {token}"},
            )
            assert moved.status == 200, moved.body
            documents_before = sum(1 for url in requests if url.rstrip("/").endswith("/e/start"))

            wait_for_true(
                page,
                "!document.getElementById('waiting-part').hidden"
                " && document.getElementById('position').textContent.trim() !== ''",
                timeout=40_000,
            )
            assert page.evaluate("window.notReloaded") is True
            assert page.locator("#prequeue-part").is_hidden()
            assert page.get_attribute("#live", "data-status") == "waiting"
            assert page.inner_text("#status-text") in ("You're in line.", "You're next!")
            # No page load and no poll of the ticket: the socket brought the place.
            assert sum(1 for url in requests if url.rstrip("/").endswith("/e/start")) == (
                documents_before
            )
            assert not [url for url in requests if "/api/v1/tickets/" in url]
            ticket = page.evaluate("JSON.parse(document.getElementById('wr-config').textContent)")[
                "ticket"
            ]
            status = request("GET", f"{base}/api/v1/tickets/{ticket}").body
            assert status["status"] == "waiting"
            assert page.inner_text("#position") == str(status["position"]) == "5"
            assert page.inner_text("#queue-length") == str(status["queue_length"])
            screenshot(page, "prequeue-after-start.png", tmp_path)

            # The line moves one place, and the fan reloads: the progress bar still counts
            # from where they were first placed (kept by the tab: no render set the cookie).
            (in_shop,) = [
                answer["pass"]
                for answer in (request("GET", f"{base}/api/v1/tickets/{t}").body for t in club)
                if answer["status"] == "admitted"
            ]
            pass_complete(base, event.integration_key, in_shop)
            wait_for_true(page, "document.getElementById('position').textContent === '4'")
            page.reload()
            wait_for_true(
                page,
                "document.getElementById('progress-bar').style.width === '20%'",
                timeout=15_000,
            )
            assert page.inner_text("#position") == "4"
