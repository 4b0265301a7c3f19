"""A phone's page closed for a minute (six heartbeats) and opened again, in a real browser
against the real processes (queueing/line/away.py): on a paused line it is where it was; on a
moving line whose turn came meanwhile it goes into the shop on return; and a place ends only
once ``away_seconds`` are over."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest
from django.db import connections
from django.utils import timezone
from playwright.sync_api import Browser, BrowserContext

from queueing.models import QueueEntry
from queueing.rules.ticket_codec import ticket_read
from staff.services import event_pause, event_resume
from tests.browser import chromium, screenshot
from tests.http import fan_joins, pass_complete, ticket_status
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

T = TypeVar("T")
CLOSED_FOR = 60  # seconds: a phone in a pocket, six heartbeats and twice the short hold
HEARTBEAT = 10
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "is_mobile": True,
    "has_touch": True,
    "user_agent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 "
    "(KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36",
    "locale": "en-US",
}


def phone_joins(browser: Browser, base: str, slug: str) -> tuple[BrowserContext, str]:
    """A phone opens the on-sale's page and joins; its context (cookies) and its ticket."""
    phone = browser.new_context(**PHONE)
    page = phone.new_page()
    page.goto(f"{base}/e/{slug}/")
    page.wait_for_selector("#position:not(:empty)", timeout=15_000)
    ticket = page.evaluate("JSON.parse(document.getElementById('wr-config').textContent).ticket")
    page.close()  # the tab is closed (or the phone put it to sleep)
    return phone, ticket


def outside_the_browser_loop(work: Callable[[], T]) -> T:
    """``work`` with the database, in a thread of its own: Playwright's sync API runs an event
    loop in this one, where Django refuses to touch the database."""

    def run() -> T:
        try:
            return work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(run).result()


def entry_of(ticket: str) -> QueueEntry:
    entry_id = ticket_read(ticket).entry_id
    return outside_the_browser_loop(lambda: QueueEntry.objects.get(pk=entry_id))


class PresentFans:
    """Fans whose pages stay open (they poll), and who check out as soon as they are let in."""

    def __init__(self, base: str, integration_key: str, tickets: list[str]) -> None:
        self.base, self.key, self.tickets = base, integration_key, list(tickets)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set() and self.tickets:
            for ticket in list(self.tickets):
                body = ticket_status(self.base, ticket)
                if body["status"] == "admitted":
                    self.tickets.remove(ticket)
                    pass_complete(self.base, self.key, body["pass"])
            time.sleep(1)


def test_a_phone_page_closed_for_a_minute_keeps_its_place(make_event, tmp_path: Path) -> None:
    with running_stack() as stack:
        base = stack.web_at_public_url()
        paused = make_event(
            slug="paused", capacity=1, rate_per_minute=0, heartbeat_seconds=HEARTBEAT
        )
        moving = make_event(
            slug="moving",
            capacity=1,
            rate_per_minute=0,
            heartbeat_seconds=HEARTBEAT,
            target_url=f"{base}/shop/moving/",
        )
        short = make_event(
            slug="short",
            capacity=1,
            rate_per_minute=0,
            heartbeat_seconds=HEARTBEAT,
            away_seconds=30,
        )
        # Paused at first, so that nobody's turn comes before the phones have gone quiet.
        for event in (paused, moving, short):
            event_pause(event=event, actor="test", now=timezone.now())
        for _ in range(2):
            fan_joins(base, "paused")  # two ahead of the phone on the paused line
        first = fan_joins(base, "moving")["ticket"]
        stack.worker()
        stack.beat()
        with chromium() as browser:
            phone_paused, paused_ticket = phone_joins(browser, base, "paused")
            phone_moving, moving_ticket = phone_joins(browser, base, "moving")
            phone_short, short_ticket = phone_joins(browser, base, "short")
            closed_at = time.monotonic()
            assert ticket_status(base, paused_ticket)["position"] == 3
            assert ticket_status(base, moving_ticket)["position"] == 2
            # Behind the phone on the moving line, a fan whose page stays open.
            behind = fan_joins(base, "moving")["ticket"]
            present = PresentFans(base, moving.integration_key, [first, behind])
            # The short hold: not over at heartbeat + 15 s, over after heartbeat + 30 s.
            while time.monotonic() - closed_at < HEARTBEAT + 15:
                time.sleep(1)
            assert entry_of(short_ticket).status == "waiting"
            # The line moves once the phones' pages have gone quiet (away): the phone's turn
            # comes while it is away, and the fan behind goes in instead.
            outside_the_browser_loop(
                lambda: event_resume(event=moving, actor="test", now=timezone.now())
            )
            wait_until(
                lambda: entry_of(moving_ticket).passed_over_at is not None,
                timeout=60,
                what="the away phone to be passed over at its turn",
            )
            wait_until(lambda: not present.tickets, timeout=60, what="the fan behind to go in")
            assert entry_of(moving_ticket).status == "waiting"
            wait_until(
                lambda: entry_of(short_ticket).status == "expired",
                timeout=60,
                what="the short hold to end",
            )
            assert time.monotonic() - closed_at >= HEARTBEAT + 30 - 2

            time.sleep(max(0.0, CLOSED_FOR - (time.monotonic() - closed_at)))
            present.stop.set()

            page = phone_paused.new_page()
            page.goto(f"{base}/e/paused/")
            page.wait_for_selector("#position:not(:empty)", timeout=15_000)
            assert page.inner_text("#position") == "3"
            assert entry_of(paused_ticket).status == "waiting"
            screenshot(page, "away-paused.png", tmp_path)

            page = phone_moving.new_page()
            page.goto(f"{base}/e/moving/")
            page.wait_for_url(f"{base}/shop/moving/?wr_pass=*", timeout=30_000)
            entry = entry_of(moving_ticket)
            assert entry.status == "admitted" and entry.passed_over_at is None

            page = phone_short.new_page()
            page.goto(f"{base}/e/short/")
            assert "expired" in page.inner_text("#status-text")
            present.thread.join(timeout=10)
