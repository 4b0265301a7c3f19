"""The fans' waiting page in a real browser, against the real processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.browser import chromium
from tests.http import pass_complete, request
from tests.processes import ROOT, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

SCREENSHOT = ROOT / "docs" / "waiting-page.png"


def test_a_fan_watches_the_line_move_and_lands_in_the_shop(make_event, tmp_path: Path) -> None:
    with running_stack() as stack:
        base = stack.web_at_public_url()
        key = make_event(
            slug="tour",
            capacity=1,
            rate_per_minute=0,
            heartbeat_seconds=600,
            target_url=f"{base}/shop/tour/",
        )
        key = key.integration_key
        others = [
            request("POST", f"{base}/api/v1/events/tour/join", {}).body["ticket"] for _ in range(3)
        ]
        stack.worker()
        stack.beat()
        with chromium() as browser:
            page = browser.new_page(locale="en-US", viewport={"width": 900, "height": 700})
            page.goto(f"{base}/e/tour/")
            page.wait_for_selector("#position")
            seen = [int(page.inner_text("#position"))]
            assert seen[0] >= 2
            assert "minute" in page.inner_text("#wait") or "estimate" in page.inner_text("#wait")
            shot = SCREENSHOT if os.environ.get("WR_SAVE_SCREENSHOTS") else tmp_path / "w.png"
            page.screenshot(path=str(shot), full_page=True)

            # The fans ahead are let in one at a time and finish shopping.
            for ticket in others:
                body = wait_until(
                    lambda t=ticket: (
                        (s := request("GET", f"{base}/api/v1/tickets/{t}").body)["status"]
                        == "admitted"
                        and s
                    ),
                    timeout=15,
                    what="the fan ahead to be admitted",
                )
                pass_complete(base, key, body["pass"])
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and "/shop/" not in page.url:
                    text = page.inner_text("#position") if page.locator("#position").count() else ""
                    if text.isdigit() and int(text) != seen[-1]:
                        seen.append(int(text))
                        break
                    time.sleep(0.2)

            # Then it is this fan's turn: the page moves to the shop by itself.
            page.wait_for_url(f"{base}/shop/tour/?wr_pass=*", timeout=15_000)
            assert "verified offline" in page.inner_text("body")
            token = page.url.split("wr_pass=", 1)[1]
            verdict = request("POST", f"{base}/api/v1/passes/verify", {"pass": token}).body
            assert verdict["valid"] is True and verdict["event"] == "tour"
        # It watched its position fall, live, without reloading.
        assert seen == sorted(seen, reverse=True) and len(seen) >= 2, seen


def test_the_page_works_without_javascript(make_event) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="nojs", capacity=0, rate_per_minute=60)
        with chromium() as browser:
            context = browser.new_context(java_script_enabled=False, locale="de-DE")
            page = context.new_page()
            page.goto(f"{base}/e/nojs/")
            page.click("form.join button")  # without a script, joining takes a click
            assert page.inner_text("#position") == "1"
            assert "Sie sind als Nächstes dran!" in page.inner_text("main")
            refresh = page.locator("noscript").first.inner_html()
            assert 'http-equiv="refresh"' in refresh


def test_the_page_solves_a_proof_of_work_on_its_own(make_event) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="pow", capacity=0, rate_per_minute=60, pow_difficulty=12)
        with chromium() as browser:
            page = browser.new_page(locale="en-US")
            page.goto(f"{base}/e/pow/")
            page.click("form.join button")
            page.wait_for_selector("#position", timeout=20_000)
            assert page.inner_text("#position") == "1"
