"""Sold out, live, in a real browser against the real processes: a fan's waiting page, and a
pre-queue page, turn to "Sold out" with the shop's word within 2 s of the shop's call
(``POST /api/v1/events/{slug}/sold-out``), without a reload; a reload says the same."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page

from tests.browser import chromium, screenshot, wait_for_true, watch_errors
from tests.http import request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

# The brief's promise: the page says it within 2 s of the shop's call.
WITHIN_SECONDS = 2.0
SAYS_SOLD_OUT = "document.getElementById('status-text').textContent === 'Sold out'"
WORD = "Thank you! Every ticket found a fan."


def shop_sells_out(base: str, slug: str, key: str) -> float:
    """The shop's call (its integration key); the moment it was sent."""
    sent = time.monotonic()
    reply = request(
        "POST",
        f"{base}/api/v1/events/{slug}/sold-out",
        {"message": WORD},
        {"Authorization": f"Bearer {key}"},
    )
    assert reply.status == 200, reply.body
    assert reply.body["sold_out_at"] is not None
    return sent


def seconds_until_sold_out(page: Page, sent: float) -> float:
    wait_for_true(page, SAYS_SOLD_OUT, timeout=15_000)
    return time.monotonic() - sent


def test_a_waiting_page_says_sold_out_within_2_s_of_the_shops_call(
    make_event, tmp_path: Path
) -> None:
    with running_stack() as stack:
        base = stack.web()
        event = make_event(slug="gig", capacity=1, rate_per_minute=0, heartbeat_seconds=600)
        key = event.integration_key
        stack.worker()
        stack.beat()
        # Someone in the shop already: the page's fan waits, first in line.
        first = request("POST", f"{base}/api/v1/events/gig/join", {}).body["ticket"]
        wait_until(
            lambda: request("GET", f"{base}/api/v1/tickets/{first}").body["status"] == "admitted",
            timeout=20,
            what="the first fan to be let in",
        )
        with chromium() as browser:
            page = browser.new_page(locale="en-US", viewport={"width": 800, "height": 640})
            errors: list[str] = []
            watch_errors(page, errors)
            page.goto(f"{base}/e/gig/")
            page.wait_for_selector("#position")
            wait_for_true(page, "document.getElementById('position').textContent === '1'")
            page.evaluate("window.notReloaded = true")

            sent = shop_sells_out(base, "gig", key)
            took = seconds_until_sold_out(page, sent)
            assert took <= WITHIN_SECONDS, f"the page said it after {took:.2f} s"
            assert page.evaluate("window.notReloaded") is True  # live, in place
            assert page.inner_text("#sold-out-message") == WORD
            assert page.is_hidden("#waiting-part") and page.is_hidden("#line-tools")
            assert "Every ticket has been sold." in page.inner_text("#live")
            screenshot(page, "sold-out.png", tmp_path, kept=True)

            # The room sends the line home as sold out; a reload says the same.
            wait_until(
                lambda: (
                    request("GET", f"{base}/api/v1/tickets/{first}").body["status"] == "admitted"
                ),
                timeout=5,
                what="the fan in the shop to keep their session",
            )
            page.reload()
            assert page.inner_text("#status-text") == "Sold out"
            assert page.inner_text("#sold-out-message") == WORD
            assert errors == [], errors
            print(f"waiting page said sold out {took:.3f} s after the shop's call")


def test_a_pre_queue_page_says_sold_out_within_2_s_of_the_shops_call(make_event) -> None:
    now = timezone.now()
    with running_stack() as stack:
        base = stack.web()
        event = make_event(
            slug="soon",
            prequeue_opens_at=now - timedelta(hours=1),
            starts_at=now + timedelta(hours=1),
        )
        key = event.integration_key
        stack.worker()
        stack.beat()
        with chromium() as browser:
            page = browser.new_page(locale="en-US")
            page.goto(f"{base}/e/soon/")
            page.wait_for_selector("#prequeue-part")
            # Told by the tick on its socket, or, had the socket not opened yet, by the
            # snapshot it opens with (which carries the last tick): either way, live.
            sent = shop_sells_out(base, "soon", key)
            took = seconds_until_sold_out(page, sent)
            assert took <= WITHIN_SECONDS, f"the page said it after {took:.2f} s"
            assert page.is_hidden("#prequeue-part")
            assert page.inner_text("#sold-out-message") == WORD
            print(f"pre-queue page said sold out {took:.3f} s after the shop's call")
