"""Deep link and re-entry in a real browser, against the real processes: a fan who came from
a shop page goes back to it when admitted; when the shop abandons the session, the page
offers the way back, puts the fan at the front, and goes on live until the shop again."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.browser import chromium
from tests.http import pass_complete, request
from tests.processes import ROOT, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

SCREENSHOT = ROOT / "docs" / "reentry-page.png"


def test_a_fan_goes_back_to_the_deep_link_and_back_in_line_after_an_abandoned_visit(
    make_event, tmp_path: Path
) -> None:
    with running_stack() as stack:
        base = stack.web_at_public_url()
        event = make_event(
            slug="encore",
            capacity=1,
            rate_per_minute=0,
            heartbeat_seconds=600,
            reentry_seconds=600,
            target_url=f"{base}/shop/encore/",
        )
        key = event.integration_key
        deep = f"{base}/shop/encore/?seat=C7"
        stack.worker()
        stack.beat()

        def admitted_pass(ticket: str) -> str:
            body = wait_until(
                lambda: (
                    (s := request("GET", f"{base}/api/v1/tickets/{ticket}").body)["status"]
                    == "admitted"
                    and s
                ),
                timeout=15,
                what="the other fan to be admitted",
            )
            return body["pass"]

        with chromium() as browser:
            page = browser.new_page(locale="en-US", viewport={"width": 900, "height": 700})
            # Nobody ahead and room in the shop: straight back to the page first asked for.
            page.goto(f"{base}/e/encore/?return={quote(deep, safe='')}")
            page.wait_for_url(f"{deep}&wr_pass=*", timeout=15_000)
            first_pass = page.url.split("wr_pass=", 1)[1]

            other = request("POST", f"{base}/api/v1/events/encore/join", {}).body["ticket"]
            pass_complete(base, key, first_pass, "abandoned")  # the shop gives up on this visit
            other_pass = admitted_pass(other)  # the slot went to the fan behind

            page.goto(f"{base}/e/encore/")
            status = page.inner_text("#status-text")
            assert "Your visit to the shop ended before you finished." in status
            assert "You can go back to the front of the line until" in page.inner_text("main")
            shot = SCREENSHOT if os.environ.get("WR_SAVE_SCREENSHOTS") else tmp_path / "r.png"
            page.screenshot(path=str(shot), full_page=True)

            page.click("form.reenter button")
            page.wait_for_selector("#position")
            assert page.inner_text("#position") == "1"
            # The page is a waiting page again: when the shop frees the slot, it goes on
            # by itself, to the deep link with a new pass.
            pass_complete(base, key, other_pass)
            page.wait_for_url(f"{deep}&wr_pass=*", timeout=15_000)
            second_pass = page.url.split("wr_pass=", 1)[1]
            assert second_pass != first_pass
            verdicts = [
                request("POST", f"{base}/api/v1/passes/verify", {"pass": p}).body
                for p in (second_pass, first_pass)
            ]
            assert verdicts[0]["valid"] is True
            assert verdicts[1]["valid"] is False
