"""The fans' page tells the truth, in a real browser against the real processes (web, worker,
beat): the wait's sentence per situation, the same on the server's first paint and live
(a line that moved while still measuring, paused, maintenance); maintenance said once; the
others in the pre-queue counted without the fan; the start in the fan's own time zone; no
"Continue on your phone" on a phone; no way back into the line after a purchase. Screenshots
in English and Arabic (right to left) go to WR_SHOTS_DIR when it is set."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone, translation
from playwright.sync_api import Page

from queueing.rules.eta import wait_bound
from queueing.rules.wording import WaitKind, wait_text
from tests.browser import chromium, wait_for_true
from tests.helpers import staff_token
from tests.http import pass_complete, request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
)
# iPadOS Safari calls itself a Mac: only its pointer gives it away.
IPAD_AS_DESKTOP = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Safari/605.1.15"
)
SESSION = 300


def shot(page: Page, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("WR_SHOTS_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)


def said(kind: WaitKind, lang: str = "en", **figures: float) -> str:
    with translation.override(lang):
        return wait_text(kind, bound_seconds=figures.get("bound"))


def bounded(position: int, lang: str = "en") -> str:
    bound = wait_bound(position, rate_per_minute=0, capacity=1, session_seconds=SESSION)
    assert bound is not None
    return said(WaitKind.BOUNDED, lang, bound=bound)


def steer(base: str, token: str, slug: str, action: str = "", **changes: str) -> None:
    """Through the staff API, as staff would (no database calls from the browser's thread)."""
    if action:
        reply = request(
            "POST",
            f"{base}/api/v1/manage/events/{slug}/{action}",
            {},
            {"Authorization": f"Token {token}"},
        )
    else:
        reply = request(
            "PATCH",
            f"{base}/api/v1/manage/events/{slug}/",
            changes,
            {"Authorization": f"Token {token}"},
        )
    assert reply.status == 200, reply.body


def text_becomes(page: Page, element_id: str, text: str, timeout: float = 15_000) -> None:
    wait_for_true(
        page,
        f"document.getElementById({element_id!r}).textContent.trim() === {text!r}",
        timeout=timeout,
    )


def test_the_wait_says_what_is_true_in_every_situation_first_paint_and_live(
    make_event, tmp_path
) -> None:
    with running_stack() as stack:
        base = stack.web()
        # One place in the shop, five-minute sessions, no rate: the pace is the shop's, and
        # nothing is measured until ten fans have left it.
        key = make_event(
            slug="truth",
            capacity=1,
            rate_per_minute=0,
            session_seconds=SESSION,
            heartbeat_seconds=600,
        ).integration_key
        token = staff_token("ann", superuser=True)
        ahead = [
            request("POST", f"{base}/api/v1/events/truth/join", {}).body["ticket"] for _ in range(3)
        ]
        stack.worker()
        stack.beat()
        first = wait_until(
            lambda: (
                (s := request("GET", f"{base}/api/v1/tickets/{ahead[0]}").body)["status"]
                == "admitted"
                and s
            ),
            timeout=20,
            what="the first fan to be let in",
        )
        with chromium() as browser:
            page = browser.new_page(locale="en-US", viewport={"width": 900, "height": 900})
            page.goto(f"{base}/e/truth/")
            page.wait_for_selector("#position")
            arabic = browser.new_page(locale="ar", viewport={"width": 900, "height": 900})
            arabic.goto(f"{base}/e/truth/")
            arabic.wait_for_selector("#position")
            assert page.inner_text("#position") == "3"
            assert arabic.inner_text("#position") == "4"

            # Still measuring, the shop's capacity binding: at most, from the settings, the
            # same on the first paint and after the ticks.
            assert page.inner_text("#wait") == bounded(3)
            page.evaluate("window.notReloaded = true")
            wait_for_true(page, "window.django && typeof django.ngettext === 'function'")
            page.wait_for_timeout(2500)  # ticks arrive
            assert page.inner_text("#wait") == bounded(3)
            assert arabic.inner_text("#wait") == bounded(4, "ar")
            shot(page, "measuring-en.png", tmp_path)
            shot(arabic, "measuring-ar.png", tmp_path)

            # The line moves (the fan in the shop is done, the next goes in): live, a new
            # bound for the new place, never "as soon as the line starts moving".
            pass_complete(base, key, first["pass"])
            text_becomes(page, "position", "2")
            text_becomes(page, "wait", bounded(2))
            assert "as soon as" not in page.inner_text("main")
            page.reload()
            page.wait_for_selector("#position")
            assert page.inner_text("#wait") == bounded(2)
            page.evaluate("window.notReloaded = true")

            # Paused by staff: on hold, live and on a reload.
            steer(base, token, "truth", "pause")
            text_becomes(page, "wait", said(WaitKind.PAUSED))
            assert page.inner_text("#status-text") == (
                "The sale is paused for a moment. You keep your place."
            )
            text_becomes(arabic, "wait", said(WaitKind.PAUSED, "ar"))
            assert page.inner_text("#position") == "2"  # the place is kept
            shot(page, "paused-en.png", tmp_path)
            shot(arabic, "paused-ar.png", tmp_path)
            assert page.evaluate("window.notReloaded") is True

            # Maintenance: one message, in the page's first line; the wait on hold.
            steer(base, token, "truth", mode="maintenance")
            maintenance = (
                "The shop is paused for maintenance. You keep your place and go in when it reopens."
            )
            text_becomes(page, "status-text", maintenance)
            text_becomes(page, "wait", said(WaitKind.MAINTENANCE))
            text_becomes(arabic, "wait", said(WaitKind.MAINTENANCE, "ar"))
            for shown in (page, arabic):
                assert shown.locator("#maintenance").count() == 0
                assert shown.locator(".status:visible").count() == 1
            assert "closed" not in page.inner_text("main")
            shot(page, "maintenance-en.png", tmp_path)
            shot(arabic, "maintenance-ar.png", tmp_path)
            page.reload()
            page.wait_for_selector("#position")
            assert page.inner_text("#status-text") == maintenance
            assert page.inner_text("#wait") == said(WaitKind.MAINTENANCE)
            assert page.locator(".status:visible").count() == 1

            # Back to work: the bound again.
            steer(base, token, "truth", mode="queue")
            steer(base, token, "truth", "resume")
            text_becomes(page, "wait", bounded(2))
            text_becomes(page, "status-text", "You're in line.")


def test_the_prequeue_counts_the_others_and_names_the_start_in_the_fans_zone(
    make_event, tmp_path
) -> None:
    with running_stack() as stack:
        base = stack.web()
        starts = (timezone.now() + timedelta(hours=2)).replace(second=0, microsecond=0)
        make_event(slug="soon", starts_at=starts, heartbeat_seconds=600)
        stack.worker()
        stack.beat()
        tokyo = starts.astimezone(ZoneInfo("Asia/Tokyo"))
        with chromium() as browser:
            for lang in ("en-US", "ar"):
                context = browser.new_context(
                    locale=lang, timezone_id="Asia/Tokyo", viewport={"width": 900, "height": 800}
                )
                page = context.new_page()
                page.goto(f"{base}/e/soon/")
                page.wait_for_selector("#prequeue-part")
                # The script wrote the start again in the browser's zone, named.
                wait_for_true(page, "document.querySelector('#starts-at time[data-zone]') !== null")
                start = page.inner_text("#starts-at")
                assert "UTC" not in start
                assert page.get_attribute("#starts-at time", "data-zone") == "Asia/Tokyo"
                hour = tokyo.hour % 12 or 12
                assert f"{hour}:{tokyo.minute:02d}" in start, start
                assert "GMT+9" in start or "غرينتش+9" in start, start
                if lang == "en-US":
                    assert start.startswith("The sale starts at ")
                    assert ("PM" if tokyo.hour >= 12 else "AM") in start
                    assert page.inner_text("#others-waiting") == "Nobody else is waiting yet."
                    # Two more join: the count of the others follows live.
                    for _ in range(2):
                        request("POST", f"{base}/api/v1/events/soon/join", {})
                    text_becomes(page, "others-waiting", "2 other people are waiting with you.")
                    shot(page, "prequeue-tokyo-en.png", tmp_path)
                else:
                    shot(page, "prequeue-tokyo-ar.png", tmp_path)
                context.close()


def test_continue_on_your_phone_is_offered_on_a_desktop_only(make_event, tmp_path) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="phone", capacity=0, rate_per_minute=6, heartbeat_seconds=600)
        for _ in range(3):
            request("POST", f"{base}/api/v1/events/phone/join", {})
        with chromium() as browser:
            desktop = browser.new_page(locale="en-US", viewport={"width": 1000, "height": 900})
            desktop.goto(f"{base}/e/phone/")
            desktop.wait_for_selector("#position")
            assert desktop.locator("#continue-on-phone").is_visible()
            for lang in ("en-US", "ar"):
                phone = browser.new_context(
                    locale=lang,
                    user_agent=IPHONE,
                    viewport={"width": 390, "height": 844},
                    device_scale_factor=2,
                    is_mobile=True,
                    has_touch=True,
                ).new_page()
                phone.goto(f"{base}/e/phone/")
                phone.wait_for_selector("#position")
                # Left out by the server (the browser says it is a phone).
                assert phone.locator("#continue-on-phone").count() == 0
                assert phone.locator("#turn-mail").is_visible()
                shot(phone, f"phone-{lang[:2]}.png", tmp_path)
            # A tablet that calls itself a desktop: the server offers it, the stylesheet hides
            # it (its pointer is a finger).
            tablet = browser.new_context(
                locale="en-US",
                user_agent=IPAD_AS_DESKTOP,
                viewport={"width": 820, "height": 1180},
                has_touch=True,
            ).new_page()
            tablet.goto(f"{base}/e/phone/")
            tablet.wait_for_selector("#position")
            assert tablet.locator("#continue-on-phone").count() == 1
            assert tablet.locator("#continue-on-phone").is_hidden()


def test_after_a_purchase_the_page_thanks_and_offers_no_way_back(make_event, tmp_path) -> None:
    with running_stack() as stack:
        base = stack.web_at_public_url()
        make_event(
            slug="bought",
            capacity=1,
            rate_per_minute=0,
            heartbeat_seconds=600,
            target_url=f"{base}/shop/bought/",
        )
        stack.worker()
        stack.beat()
        with chromium() as browser:
            page = browser.new_page(locale="en-US", viewport={"width": 900, "height": 700})
            page.goto(f"{base}/e/bought/")
            page.wait_for_url(f"{base}/shop/bought/*", timeout=20_000)
            page.click("button[value=completed]")
            page.wait_for_load_state()
            page.goto(f"{base}/e/bought/")
            assert page.inner_text("#status-text") == "Your purchase is complete."
            assert "Thank you for waiting with us." in page.inner_text("main")
            assert page.locator("input[name=rejoin]").count() == 0
            assert "Join" not in page.inner_text("main")
            shot(page, "completed-en.png", tmp_path)
            page.select_option("#language", "ar")
            page.click("form.languages button")
            page.wait_for_selector("html[lang=ar]")
            assert page.locator("input[name=rejoin]").count() == 0
            shot(page, "completed-ar.png", tmp_path)
