"""Debian's Chromium driven by Playwright (no browser download: the system one is used)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

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
