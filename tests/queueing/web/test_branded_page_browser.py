"""A branded on-sale in a real browser, against the real processes: the waiting page wears the
logo (served by the room, under the page's CSP), the accent and staff's texts, on a desktop and
on a 390x844 phone; and the admin's Preview shows unsaved changes in a new tab, with the
contrast warning, saving nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.utils import timezone

from events.models import Event, EventLogo
from queueing.models import AuditRecord
from staff.services import event_logo_change, event_update
from tests.browser import chromium
from tests.helpers import staff_user
from tests.http import request
from tests.images import badge_png
from tests.processes import ROOT, running_stack

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

SHOTS = Path(os.environ.get("WR_LOOK_SHOTS", "/work/helpers/shots/look"))
DOCS_SHOT = ROOT / "docs" / "branded-page.png"
ACCENT = "#7c3aed"
ACCENT_RGB = "rgb(124, 58, 237)"
INTRO = (
    "**Presale sold out.** The general sale opens at *10:00*; everyone here now gets a fair, "
    "random place when it starts.\n\n- one order per fan\n- up to 4 tickets per order"
)
NEXT_STEPS = (
    "When it's your turn you go to the shop by yourself and have **10 minutes** to pay. "
    "Questions? See the [help page](https://shop.example/help)."
)


def shot_path(name: str, tmp_path: Path) -> Path:
    """Under /work/helpers/shots/look/ where that exists (to be looked at), else the test's."""
    target = SHOTS if SHOTS.parent.exists() else tmp_path
    target.mkdir(parents=True, exist_ok=True)
    return target / name


def shot(page, name: str, tmp_path: Path) -> Path:
    path = shot_path(name, tmp_path)
    page.screenshot(path=str(path), full_page=True)
    return path


def branded_event(make_event) -> Event:
    event = make_event(slug="summer", capacity=0, heartbeat_seconds=600)
    Event.objects.filter(pk=event.pk).update(name="Summer Tour 2027")
    event = event_update(
        event=Event.objects.get(pk=event.pk),
        actor="staff:ann",
        now=timezone.now(),
        changes={"accent_color": ACCENT, "intro_text": INTRO, "next_steps_text": NEXT_STEPS},
    )
    return event_logo_change(event=event, actor="staff:ann", now=timezone.now(), image=badge_png())


def assert_branded(page) -> None:
    logo = page.locator("img.logo")
    assert logo.get_attribute("alt") == "Summer Tour 2027"
    # Loaded from the room, past the page's CSP (img-src 'self').
    assert logo.evaluate("img => img.complete && img.naturalWidth") == 240
    assert "Presale sold out." in page.inner_text("#intro strong")
    assert "What happens next" in page.inner_text("#next-steps")
    link = page.locator("#next-steps a")
    assert link.evaluate("a => getComputedStyle(a).color") == ACCENT_RGB
    assert link.get_attribute("rel") == "noopener noreferrer nofollow"


def test_a_branded_waiting_page_on_a_desktop_and_a_phone(make_event, tmp_path: Path) -> None:
    event = branded_event(make_event)
    with running_stack() as stack:
        base = stack.web()
        ahead = [
            request("POST", f"{base}/api/v1/events/summer/join", {}).body["ticket"]
            for _ in range(5)
        ]
        with chromium() as browser:
            desktop = browser.new_page(locale="en-US", viewport={"width": 1280, "height": 900})
            desktop.goto(f"{base}/e/summer/")
            desktop.wait_for_selector("#position")
            assert desktop.inner_text("#position") == "6"
            # Three fans ahead leave: after a reload the bar shows the way come so far.
            for ticket in ahead[:3]:
                request("DELETE", f"{base}/api/v1/tickets/{ticket}")
            desktop.reload()
            desktop.wait_for_selector("#position")
            assert desktop.inner_text("#position") == "3"
            assert_branded(desktop)
            bar = desktop.locator("#progress-bar")
            assert bar.evaluate("b => getComputedStyle(b).backgroundColor") == ACCENT_RGB
            first = shot(desktop, "waiting-desktop.png", tmp_path)
            if os.environ.get("WR_SAVE_SCREENSHOTS"):
                shutil.copyfile(first, DOCS_SHOT)

            phone = browser.new_context(
                locale="en-US",
                viewport={"width": 390, "height": 844},
                device_scale_factor=2,
                is_mobile=True,
                has_touch=True,
            )
            mobile = phone.new_page()
            mobile.goto(f"{base}/e/summer/")
            mobile.wait_for_selector("#position")
            assert_branded(mobile)
            # Readable on a phone: nothing wider than the screen.
            assert mobile.evaluate("document.documentElement.scrollWidth") <= 390
            assert (
                mobile.locator("img.logo").evaluate("i => i.getBoundingClientRect().width") <= 390
            )
            shot(mobile, "waiting-phone.png", tmp_path)

            # Without JavaScript the join page keeps its button, in the on-sale's colour.
            plain = browser.new_context(
                java_script_enabled=False, locale="en-US", viewport={"width": 390, "height": 844}
            )
            join = plain.new_page()
            join.goto(f"{base}/e/summer/")
            button = join.locator("form.join button")
            assert button.evaluate("b => getComputedStyle(b).backgroundColor") == ACCENT_RGB
            assert_branded(join)
            shot(join, "join-phone.png", tmp_path)
    assert event.pk


def test_the_admin_preview_shows_unsaved_changes_and_saves_nothing(
    make_event, tmp_path: Path
) -> None:
    event = branded_event(make_event)
    boss = staff_user("boss", superuser=True, password=None)
    get_user_model().objects.filter(pk=boss.pk).update(
        password=make_password("a-long-pass-123", hasher="pbkdf2_sha256")
    )
    before = (
        Event.objects.filter(pk=event.pk).values().get(),
        AuditRecord.objects.filter(event=event).count(),
        bytes(EventLogo.objects.get(event=event).data),
    )
    logo = tmp_path / "new-logo.png"
    logo.write_bytes(badge_png(color=(234, 179, 8)))
    with running_stack() as stack:
        base = stack.web()
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{base}/admin/login/?next=/admin/events/event/{event.pk}/change/")
            page.fill("#id_username", "boss")
            page.fill("#id_password", "a-long-pass-123")
            page.click("input[type=submit]")
            page.wait_for_selector("#id_accent_color")
            contrast = page.locator(".field-accent_contrast .readonly")
            assert contrast.inner_text().startswith("5.70:1 with white (fine")
            page.fill("#id_accent_color", "#facc15")  # too light for white text
            # The check follows the field as staff type, before any save.
            assert contrast.inner_text().startswith("1.53:1 with white (too low")
            page.fill("#id_intro_text", "**Unsaved** intro: general sale at 10:00.")
            page.set_input_files("#id_logo", str(logo))
            fieldset = page.locator("fieldset:has(#id_accent_color)")
            fieldset.screenshot(path=str(shot_path("admin-look-fieldset.png", tmp_path)))
            with page.context.expect_page() as opened:
                page.click("input[name=_look_preview]")
            preview = opened.value
            preview.wait_for_selector("#contrast-warning")
            assert "1.53:1" in preview.inner_text("#contrast-warning")
            assert "Unsaved" in preview.inner_text("#intro strong")
            src = preview.locator("img.logo").get_attribute("src") or ""
            assert src.startswith("data:image/png;base64,")
            assert preview.locator("img.logo").evaluate("i => i.naturalWidth") == 240
            bar = preview.locator("#progress-bar")
            assert bar.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(250, 204, 21)"
            shot(preview, "admin-preview.png", tmp_path)
    after = (
        Event.objects.filter(pk=event.pk).values().get(),
        AuditRecord.objects.filter(event=event).count(),
        bytes(EventLogo.objects.get(event=event).data),
    )
    assert after == before
