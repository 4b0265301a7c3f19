"""The waiting page in other languages, in a real browser against the real processes: Japanese,
Arabic laid out right to left (desktop and phone), Polish plurals said as the server says them,
the language switcher, and live updates that keep the language."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.humanize.templatetags.humanize import intcomma
from django.utils import translation

from tests.browser import chromium, wait_for_true
from tests.http import pass_complete, request
from tests.processes import ROOT, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ.get("WR_SHOTS_DIR", "/work/helpers/shots/lang2"))
DOC_SHOT = ROOT / "docs" / "waiting-page-ar.png"
MINUTES = ("about %(n)d minute", "about %(n)d minutes")


def _shot(page, name: str, tmp_path: Path) -> None:
    folder = SHOTS if SHOTS.parent.exists() else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)


def _line(base: str, slug: str, ahead: int) -> list[str]:
    return [
        request("POST", f"{base}/api/v1/events/{slug}/join", {}).body["ticket"]
        for _ in range(ahead)
    ]


def _let_in_and_finish(base: str, ticket: str, key: str) -> None:
    """The fan ``ticket`` is admitted by the worker, then finishes shopping."""
    body = wait_until(
        lambda: (
            (s := request("GET", f"{base}/api/v1/tickets/{ticket}").body)["status"] == "admitted"
            and s
        ),
        timeout=15,
        what="the fan ahead to be admitted",
    )
    pass_complete(base, key, body["pass"])


def _box(page, selector: str) -> dict[str, float]:
    return page.locator(selector).bounding_box()


def test_arabic_is_laid_out_right_to_left_and_stays_arabic_live(make_event, tmp_path) -> None:
    with running_stack() as stack:
        base = stack.web_at_public_url()
        key = make_event(
            slug="ar",
            capacity=1,
            rate_per_minute=0,
            heartbeat_seconds=600,
            target_url=f"{base}/shop/ar/",
        ).integration_key
        others = _line(base, "ar", 3)
        stack.worker()
        stack.beat()
        with chromium() as browser:
            page = browser.new_page(locale="ar", viewport={"width": 1000, "height": 820})
            page.goto(f"{base}/e/ar/")
            page.wait_for_selector("#position")
            assert page.get_attribute("html", "lang") == "ar"
            assert page.get_attribute("html", "dir") == "rtl"
            assert page.evaluate("getComputedStyle(document.body).direction") == "rtl"
            # Right to left: "your place" first on the right, "people in line" last on the left.
            first, last = (
                _box(page, ".figures div:first-child"),
                _box(page, ".figures div:last-child"),
            )
            assert first["x"] > last["x"]
            status = _box(page, "#status-text")
            card = _box(page, "main")
            assert status["x"] + status["width"] > card["x"] + card["width"] - 40  # starts right
            assert page.inner_text("#status-text") == "أنت في الطابور."

            # Fans ahead are let in: the place falls live, without a reload, still in Arabic
            # (and in Latin digits, as the server writes them).
            page.evaluate("window.__sameDocument = true")
            first_place = int(page.inner_text("#position"))
            for ticket in others[:2]:
                _let_in_and_finish(base, ticket, key)
            wait_for_true(
                page,
                f"Number(document.getElementById('position').textContent) < {first_place}",
                timeout=15_000,
            )
            assert page.evaluate("window.__sameDocument") is True
            assert page.inner_text("#position").isascii()
            assert page.inner_text("#status-text") in ("أنت في الطابور.", "أنت التالي!")
            wait = page.inner_text("#wait")
            assert "minute" not in wait and "estimate" not in wait
            # The progress bar fills from the right.
            wait_for_true(
                page, "document.getElementById('progress-bar').getBoundingClientRect().width > 10"
            )
            time.sleep(0.8)  # the bar's width transition
            bar, track = _box(page, "#progress-bar"), _box(page, ".progress")
            assert abs((bar["x"] + bar["width"]) - (track["x"] + track["width"])) < 1
            assert bar["x"] > track["x"] + 10
            _shot(page, "waiting-ar-desktop.png", tmp_path)
            if os.environ.get("WR_SAVE_SCREENSHOTS"):
                page.screenshot(path=str(DOC_SHOT), full_page=True)

            phone = browser.new_context(
                locale="ar", viewport={"width": 390, "height": 844}, device_scale_factor=2
            ).new_page()
            phone.goto(f"{base}/e/ar/")
            phone.wait_for_selector("#position")
            assert phone.evaluate("document.documentElement.scrollWidth") <= 390
            _shot(phone, "waiting-ar-390x844.png", tmp_path)


def test_japanese_and_the_switcher(make_event, tmp_path) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="ja", capacity=0, rate_per_minute=60)
        _line(base, "ja", 2)
        with chromium() as browser:
            page = browser.new_page(locale="ja-JP", viewport={"width": 900, "height": 760})
            page.goto(f"{base}/e/ja/")
            page.wait_for_selector("#position")
            assert page.get_attribute("html", "lang") == "ja"
            assert page.inner_text("#status-text") == "列に並んでいます。"
            assert page.inner_text("#position") == "3"
            assert page.inner_text("label[for=language]") == "言語"
            _shot(page, "waiting-ja.png", tmp_path)

            # The switcher: a labelled select, each language named in itself, and a button.
            select = page.get_by_label("言語")
            assert select.locator("option[value=ar]").inner_text() == "العربيّة"
            select.select_option("pl")
            select.focus()
            _shot(page, "switcher.png", tmp_path)
            page.get_by_role("button", name="言語を変更").click()
            page.wait_for_selector("html[lang=pl]")
            assert page.url == f"{base}/e/ja/"
            assert page.inner_text("#status-text") == "Jesteś w kolejce."
            assert page.inner_text("#position") == "3"  # the same place, now in Polish
            assert page.inner_text("label[for=language]") == "Język"


def test_the_switcher_works_without_javascript(make_event) -> None:
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="nojs", capacity=0, rate_per_minute=60)
        with chromium() as browser:
            context = browser.new_context(java_script_enabled=False, locale="de-DE")
            page = context.new_page()
            page.goto(f"{base}/e/nojs/")
            page.click("form.join button")
            page.select_option("#language", "fr")
            page.click("form.languages button")
            assert page.get_attribute("html", "lang") == "fr"
            assert page.inner_text("#position") == "1"
            assert "Vous êtes le prochain" in page.inner_text("main")


def test_the_script_says_every_wait_as_the_server_does(make_event) -> None:
    """Polish (3 forms for whole numbers), Arabic (6) and Japanese (1): the script's plural for
    any n is the server's (the catalog's own rule), and its figures are Django's."""
    with running_stack() as stack:
        base = stack.web()
        make_event(slug="plural", capacity=0, rate_per_minute=60)
        with chromium() as browser:
            for lang in ("pl", "ar", "ja"):
                page = browser.new_page(locale=lang)
                page.goto(f"{base}/e/plural/")
                page.wait_for_selector("#position")
                wait_for_true(
                    page, "typeof django === 'object' && typeof django.ngettext === 'function'"
                )
                said = page.evaluate(
                    "([one, many]) => Array.from({length: 130}, (_, n) =>"
                    " django.ngettext(one, many, n))",
                    list(MINUTES),
                )
                with translation.override(lang):
                    assert said == [translation.ngettext(*MINUTES, n) for n in range(130)]
                if lang == "pl":
                    assert said[2] != said[5]
                    assert (said[2], said[5]) == (
                        "mniej więcej %(n)d minuty",
                        "mniej więcej %(n)d minut",
                    )
                page.close()


def test_the_browser_writes_figures_as_django_does(tmp_path) -> None:
    """The script's Intl.NumberFormat (Latin digits, grouped from four digits on) and the
    server's intcomma agree in every language offered."""
    with chromium() as browser:
        page = browser.new_page()
        page.set_content("<p>figures</p>")
        for lang, _name in settings.LANGUAGES:
            written = page.evaluate(
                "(lang) => [1234, 12345, 1234567].map((n) => new Intl.NumberFormat("
                "lang + '-u-nu-latn', {useGrouping: 'always'}).format(n))",
                lang,
            )
            with translation.override(lang):
                assert written == [intcomma(n) for n in (1234, 12345, 1234567)], lang
