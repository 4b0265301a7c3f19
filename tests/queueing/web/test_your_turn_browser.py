"""Staff's word and "it's your turn" in a real browser against the real processes (web,
worker, beat): a message reaches open pages, live or polling, and goes again; a fan let in
while their tab is in the background is held on the page and called back (flashing title,
the notification they asked for, the chime only if they ticked it), then sent to the shop."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from queueing.live.ticks import broadcast_tick
from tests.browser import chromium, screenshot, wait_for_true
from tests.helpers import staff_token
from tests.http import pass_complete, request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

SHOP = "https://shop.example/checkout"

# The tab's visibility, the notifications shown and the tones played, as the page sees them.
INSTRUMENTS = """
window.__hidden = false;
Object.defineProperty(document, "hidden", { get: () => window.__hidden });
Object.defineProperty(document, "visibilityState", {
  get: () => (window.__hidden ? "hidden" : "visible"),
});
window.__notes = [];
const RealNotification = window.Notification;
class RecordedNotification {
  constructor(title, options) { window.__notes.push({ title, body: options && options.body }); }
  close() {}
  static get permission() { return RealNotification.permission; }
  static requestPermission(callback) { return RealNotification.requestPermission(callback); }
}
window.Notification = RecordedNotification;
window.__tones = 0;
const RealAudioContext = window.AudioContext;
window.AudioContext = function () {
  const context = new RealAudioContext();
  const make = context.createOscillator.bind(context);
  context.createOscillator = function () {
    const tone = make();
    const start = tone.start.bind(tone);
    tone.start = function (when) { window.__tones += 1; return start(when); };
    return tone;
  };
  return context;
};
"""


def say(base: str, token: str, slug: str, message: str) -> None:
    reply = request(
        "PATCH",
        f"{base}/api/v1/manage/events/{slug}/",
        {"message": message},
        {"Authorization": f"Token {token}"},
    )
    assert reply.status == 200, reply.body


def fill_the_shop(base: str, slug: str) -> str:
    """One fan in the shop (capacity 1): whoever joins next waits. Returns that fan's pass."""
    first = request("POST", f"{base}/api/v1/events/{slug}/join", {}).body["ticket"]
    wait_until(
        lambda: request("GET", f"{base}/api/v1/tickets/{first}").body["status"] == "admitted",
        timeout=20,
        what="the first fan to be let in",
    )
    return request("GET", f"{base}/api/v1/tickets/{first}").body["pass"]


def test_a_message_reaches_live_and_polling_pages_and_goes_again(make_event, tmp_path) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="word", capacity=1, rate_per_minute=0, heartbeat_seconds=30)
        token = staff_token("ann", superuser=True)
        stack.worker()
        stack.beat()
        fill_the_shop(base, "word")
        with chromium() as browser:
            live = browser.new_page(locale="en-US")
            live.goto(f"{base}/e/word/")
            live.wait_for_selector("#position")
            # A second fan whose browser has no WebSocket: their page polls.
            polling_context = browser.new_context(viewport={"width": 390, "height": 844})
            polling_context.add_init_script("delete window.WebSocket;")
            polling = polling_context.new_page()
            polling.goto(f"{base}/e/word/")
            polling.wait_for_selector("#position")
            assert live.locator("#staff-message-text").is_hidden()
            live.evaluate("window.notReloaded = true")

            said = time.monotonic()
            say(base, token, "word", "Presale sold out.\nGeneral sale at 10:00 <b>sharp</b>.")
            live.locator("#staff-message-text").wait_for(state="visible", timeout=5_000)
            seen_after = time.monotonic() - said
            assert seen_after < 2.0, f"the open page showed the message after {seen_after:.2f} s"
            assert live.inner_text("#staff-message-body") == (
                "Presale sold out.\nGeneral sale at 10:00 <b>sharp</b>."
            )
            assert live.locator("#staff-message-body b").count() == 0  # text, never markup
            assert live.get_attribute("#staff-message", "aria-live") == "polite"
            assert live.evaluate("window.notReloaded") is True
            screenshot(live, "staff-message.png", tmp_path, kept=True)

            polling.locator("#staff-message-text").wait_for(state="visible", timeout=20_000)
            assert "Presale sold out." in polling.inner_text("#staff-message-body")
            screenshot(polling, "staff-message-phone.png", tmp_path)

            say(base, token, "word", "")
            live.locator("#staff-message-text").wait_for(state="hidden", timeout=5_000)
            polling.locator("#staff-message-text").wait_for(state="hidden", timeout=20_000)
            # A new page shows a message at once, from the server.
            say(base, token, "word", "Back at nine.")
            fresh = browser.new_page()
            fresh.goto(f"{base}/e/word/")
            assert fresh.inner_text("#staff-message-body") == "Back at nine."


# Every message a page's socket receives, by type, before the page handles it.
SOCKET_MESSAGES = """
window.__received = [];
const RealWebSocket = window.WebSocket;
window.WebSocket = function (url, protocols) {
  const socket = new RealWebSocket(url, protocols);
  socket.addEventListener("message", (event) => {
    window.__received.push(JSON.parse(event.data).type);
  });
  return socket;
};
window.WebSocket.prototype = RealWebSocket.prototype;
"""


def test_a_new_page_keeps_the_message_the_server_rendered_over_an_older_tick(make_event) -> None:
    # No worker and no beat: the last tick in Redis is the one broadcast here, before staff's
    # word, and nothing broadcasts a newer one. A new page's snapshot carries that older tick.
    with running_stack() as stack:
        base = stack.web()
        event = make_event(slug="stale", capacity=1, rate_per_minute=0, heartbeat_seconds=60)
        assert broadcast_tick(event_id=event.id, now=timezone.now())
        say(base, staff_token("ann", superuser=True), "stale", "Back at nine.")
        with chromium() as browser:
            page = browser.new_page()
            page.add_init_script(SOCKET_MESSAGES)
            page.goto(f"{base}/e/stale/")
            page.wait_for_selector("#position")
            wait_for_true(page, "window.__received.includes('snapshot')")
            assert page.locator("#staff-message-text").is_visible()
            assert page.inner_text("#staff-message-body") == "Back at nine."


def test_a_fan_in_a_background_tab_is_called_back_when_let_in(make_event, tmp_path) -> None:
    with running_stack() as stack:
        base = stack.web()
        event = make_event(
            slug="turn", capacity=1, rate_per_minute=0, heartbeat_seconds=600, target_url=SHOP
        )
        stack.worker()
        stack.beat()
        in_shop = fill_the_shop(base, "turn")
        with chromium() as browser:
            pages = []
            for _ in range(2):  # a keen fan, then a quiet one
                context = browser.new_context(locale="en-US")
                context.add_init_script(INSTRUMENTS)
                context.route(
                    "https://shop.example/**",
                    lambda route: route.fulfill(body="<h1>The shop</h1>", content_type="text/html"),
                )
                page = context.new_page()
                page.goto(f"{base}/e/turn/")
                page.wait_for_selector("#position")
                pages.append((context, page))
            (keen_context, keen), (_, quiet) = pages
            assert keen.inner_text("#position") == "1" and quiet.inner_text("#position") == "2"

            # Nothing is asked for unprompted: the button asks, once pressed.
            assert (
                keen.is_visible("#notify-me")
                and keen.evaluate("Notification.permission") == "default"
            )
            assert keen.evaluate("window.__tones") == 0 and not keen.is_checked("#chime")
            keen_context.grant_permissions(["notifications"], origin=base)
            keen.click("#notify-me")
            wait_for_true(keen, "document.getElementById('notify-state').textContent !== ''")
            assert "notify you" in keen.inner_text("#notify-state")
            assert keen.is_hidden("#notify-me")
            keen.check("#chime")  # the fan hears what they chose
            wait_for_true(keen, "window.__tones === 2")
            screenshot(keen, "your-turn-alerts.png", tmp_path)

            # Both fans look at other tabs; the shop frees its place.
            for page in (keen, quiet):
                page.evaluate(
                    "window.__hidden = true; document.dispatchEvent(new Event('visibilitychange'))"
                )
            pass_complete(base, event.integration_key, in_shop)
            keen.locator("#your-turn").wait_for(state="visible", timeout=15_000)
            assert keen.url.startswith(base)  # held on the page, not sent off unseen
            assert keen.evaluate("window.__notes") == [
                {
                    "title": "It's your turn! – On-sale turn",
                    "body": "The shop is ready for you. Come back to the waiting room tab.",
                }
            ]
            assert keen.evaluate("window.__tones") == 4  # the chime, once more
            titles = {keen.title()}
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and len(titles) < 2:
                keen.wait_for_timeout(300)
                titles.add(keen.title())
            assert len(titles) == 2 and any(t.startswith("🔔 It's your turn!") for t in titles)
            href = keen.get_attribute("#go-to-shop", "href")
            assert href.startswith(SHOP) and "wr_pass=" in href
            screenshot(keen, "your-turn.png", tmp_path, kept=True)

            # Back to the tab: on to the shop, with the pass.
            with keen.expect_navigation(url=f"{SHOP}**"):
                keen.evaluate(
                    "window.__hidden = false; document.dispatchEvent(new Event('visibilitychange'))"
                )
            assert "The shop" in keen.inner_text("h1")

            # The quiet fan (no chime, no notification asked) is called back by the title only.
            keen_pass = href.split("wr_pass=", 1)[1].split("&", 1)[0]
            pass_complete(base, event.integration_key, keen_pass)
            quiet.locator("#your-turn").wait_for(state="visible", timeout=15_000)
            assert quiet.evaluate("window.__tones") == 0
            assert quiet.evaluate("window.__notes") == []
