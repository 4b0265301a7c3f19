"""A draw's whole path in a real browser, against the real processes: register by address on
the form (its proof of work solved by the page), the mail's link opened on a phone, confirmed
on its button, the draw run, the outcome shown with the draw to check, and the invitation's
button landing on the waiting page. A shop's fan arriving with a signed identity is registered
by the page on its own."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.utils import timezone

from queueing.line.draw import registration_draw
from queueing.models import RegistrationWindow
from tests.browser import chromium, screenshot, wait_for_true, watch_errors
from tests.helpers import registration_window_open, shop_token
from tests.mailbox import smtp_server
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def draw_now(event_id: int) -> str:
    """Close the window and run the draw through the service; the list's commitment."""
    try:
        window = RegistrationWindow.objects.get(event_id=event_id)
        window.closes_at = timezone.now() - timedelta(seconds=1)
        window.save(update_fields=["closes_at"])
        assert registration_draw(event_id=event_id, now=timezone.now()) is not None
        window.refresh_from_db()
        return window.list_root
    finally:
        connection.close()


def test_a_fan_registers_confirms_wins_and_joins_the_line(make_event, tmp_path: Path) -> None:
    with (
        smtp_server() as (mailbox, smtp_port),
        running_stack(EMAIL_HOST="127.0.0.1", EMAIL_PORT=str(smtp_port)) as stack,
    ):
        base = stack.web_at_public_url()
        event = make_event(
            slug="lottery", capacity=1, rate_per_minute=0, heartbeat_seconds=600, pow_difficulty=4
        )
        registration_window_open(event, winners=2, waitlist=0)
        stack.worker()
        errors: list[str] = []
        with chromium() as browser:
            desktop = browser.new_page(locale="en-US", viewport={"width": 1200, "height": 900})
            watch_errors(desktop, errors)
            desktop.goto(f"{base}/e/lottery/register/")
            screenshot(desktop, "register.png", tmp_path)
            desktop.fill("#email", "fan@example.com")
            desktop.click("#register")  # the page solves the puzzle, then sends the form
            desktop.wait_for_selector("text=Check your mail")
            screenshot(desktop, "register-mailed.png", tmp_path)

            message = wait_until(
                lambda: mailbox.messages and mailbox.messages[-1],
                timeout=20,
                what="the confirmation mail",
            )
            assert message["To"] == "fan@example.com"
            link = re.search(r"(http\S+/e/lottery/register/\S+/)", message.get_content()).group(1)
            assert link.startswith(f"{base}/e/lottery/register/")

            phone = browser.new_context(
                locale="en-US", viewport={"width": 390, "height": 844}, is_mobile=True
            ).new_page()
            watch_errors(phone, errors)
            phone.goto(link)
            assert phone.inner_text("#status-text") == "Confirm your registration"
            screenshot(phone, "registration-confirm-phone.png", tmp_path)
            phone.click("#confirm")
            phone.wait_for_selector("text=You are registered.")

            # A shop's fan: the page sends the signed identity by itself, puzzle and all.
            shop = browser.new_page(locale="en-US")
            watch_errors(shop, errors)
            token = shop_token("acct-7", slug="lottery")
            shop.goto(f"{base}/e/lottery/register/?shop_token={token}")
            shop.wait_for_selector("text=You are registered.")

            # Playwright runs an event loop in this thread, where Django refuses queries.
            with ThreadPoolExecutor(1) as pool:
                list_root = pool.submit(draw_now, event.id).result()

            phone.goto(link)
            assert phone.inner_text("#status-text") == "You have an invitation to the line."
            assert phone.inner_text("#list-root") == list_root
            screenshot(phone, "registration-outcome-phone.png", tmp_path)
            desktop.goto(link)
            screenshot(desktop, "registration-outcome.png", tmp_path)
            # The shop's fan, signed in again, is shown theirs by the page on its own.
            shop.goto(f"{base}/e/lottery/register/?shop_token={token}")
            shop.wait_for_selector("#join-with-invitation")
            phone.click("#join-with-invitation")
            phone.wait_for_url(f"{base}/e/lottery/")
            phone.wait_for_selector("#position")
            assert phone.inner_text("#position") == "1"
            screenshot(phone, "registration-joined.png", tmp_path)
        assert errors == []


def test_before_the_window_the_times_are_in_the_fans_zone(make_event, tmp_path: Path) -> None:
    with running_stack() as stack:
        base = stack.web()
        event = make_event(slug="soon-draw")
        opens = (timezone.now() + timedelta(hours=2)).replace(second=0, microsecond=0)
        registration_window_open(event, opens_at=opens, closes_at=opens + timedelta(hours=1))
        tokyo = opens.astimezone(ZoneInfo("Asia/Tokyo"))
        with chromium() as browser:
            page = browser.new_context(
                locale="en-US",
                timezone_id="Asia/Tokyo",
                viewport={"width": 390, "height": 844},
                is_mobile=True,
            ).new_page()
            page.goto(f"{base}/e/soon-draw/register/")
            assert "has not opened yet" in page.inner_text("#status-text")
            wait_for_true(page, "document.querySelector('time[data-zone]') !== null")
            said = page.inner_text("main")
            assert "UTC" not in said and "GMT+9" in said, said
            assert f"{tokyo.hour % 12 or 12}:{tokyo.minute:02d}" in said, said
            assert page.locator("#email").count() == 0
            screenshot(page, "register-before-tokyo-phone.png", tmp_path)
