"""Continue on your phone, in a real browser against the real processes: the laptop shows a
QR code and link, the phone confirms and shows the same place, the laptop's open page says
the place moved, and the used link does nothing more."""

from __future__ import annotations

import pytest

from tests.browser import chromium, screenshot, wait_for_true
from tests.http import request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def test_a_place_moves_from_the_laptop_to_the_phone(make_event, tmp_path) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="phone", capacity=1, rate_per_minute=0, heartbeat_seconds=600)
        stack.worker()
        stack.beat()
        first = request("POST", f"{base}/api/v1/events/phone/join", {}).body["ticket"]
        wait_until(
            lambda: request("GET", f"{base}/api/v1/tickets/{first}").body["status"] == "admitted",
            timeout=20,
            what="the first fan to be let in",
        )
        request("POST", f"{base}/api/v1/events/phone/join", {})  # one more ahead
        with chromium() as browser:
            laptop_context = browser.new_context(
                locale="en-US", viewport={"width": 1200, "height": 900}
            )
            laptop = laptop_context.new_page()
            laptop.goto(f"{base}/e/phone/")
            laptop.wait_for_selector("#position")
            assert laptop.inner_text("#position") == "2"
            # The laptop's waiting page stays open in one tab; the link is made in another.
            maker = laptop_context.new_page()
            maker.goto(f"{base}/e/phone/")
            maker.click("#continue-on-phone")
            maker.wait_for_selector("#place-link-qr svg")
            link = maker.inner_text("#place-link-url")
            assert link.startswith(f"{base}/e/phone/move/")
            screenshot(maker, "continue-on-phone.png", tmp_path, kept=True)
            maker.close()

            phone_context = browser.new_context(
                locale="en-US", viewport={"width": 390, "height": 844}, is_mobile=True
            )
            phone = phone_context.new_page()
            phone.goto(link)
            assert "Continue your place here?" in phone.inner_text("#status-text")
            screenshot(phone, "continue-on-phone-confirm.png", tmp_path)
            phone.click("#claim-place")
            phone.wait_for_selector("#position")
            assert phone.inner_text("#position") == "2"  # the same place, not a new one

            wait_for_true(
                laptop,
                "document.body.innerText.includes('Your place moved to another device.')",
                timeout=5_000,
            )
            screenshot(laptop, "moved.png", tmp_path)

            again = phone_context.new_page()
            again.goto(link)
            assert "used already" in again.inner_text("#status-text")
            phone.reload()
            assert phone.inner_text("#position") == "2"
