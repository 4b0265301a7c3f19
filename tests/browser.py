"""Debian's Chromium driven by Playwright (no browser download: the system one is used)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, Response, sync_playwright

CHROMIUM = "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parent.parent / "docs"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Page, name: str, tmp_path: Path, *, kept: bool = False) -> Path:
    """A screenshot for a person to look at. ``kept``: one of the README's pictures, written to
    docs/ when the run is asked to re-take them (WR_SAVE_SCREENSHOTS=1, `make screenshots`)."""
    folder = DOCS if kept and os.environ.get("WR_SAVE_SCREENSHOTS") else tmp_path
    path = folder / name
    page.screenshot(path=str(path), full_page=True)
    return path


def wait_for_true(page: Page, expression: str, *, timeout: float = 10_000) -> None:
    """Until ``expression`` is truthy in the page. Not ``page.wait_for_function``: once its
    first check fails it polls by evaluating the string inside the page, which the pages'
    Content-Security-Policy (no 'unsafe-eval') refuses: a flaky EvalError. ``evaluate`` goes
    through the DevTools protocol, which the policy does not govern."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} ms waiting for {expression}")
        time.sleep(0.05)


def watch_errors(
    page: Page, errors: list[str], *, expected: Callable[[Response], bool] = lambda r: False
) -> None:
    """Collect the page's script errors (a CSP refusal included) and its answers >= 400 but
    the ``expected`` ones. The console's own "Failed to load resource" lines are left out:
    the answer behind each is judged here."""
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and not m.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.on(
        "response",
        lambda r: (
            errors.append(f"{r.status} {r.url}") if r.status >= 400 and not expected(r) else None
        ),
    )
