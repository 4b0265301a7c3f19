"""The on-sale's look in the admin: the logo is checked by its bytes and kept with its digest in
one audited change, removing it works, a low-contrast colour saves with a warning, and the
Preview button shows the fans' page with unsaved values, saving nothing, to those allowed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from events.models import LOGO_MAX_BYTES, Event, EventLogo
from queueing.models import AuditRecord
from staff.services import event_logo_change, event_update
from tests.helpers import staff_client
from tests.images import GIF, HTML_PAGE, JPEG, SVG_WITH_SCRIPT, TINY_PNG, WEBP, badge_png
from tests.staff.admin_forms import change_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def boss() -> Client:
    return staff_client("boss", superuser=True)


def change_url(event: Event) -> str:
    return f"/admin/events/event/{event.pk}/change/"


def save(client: Client, event: Event, **changes: Any) -> Any:
    """Post the change form as it stands, with ``changes`` (files included)."""
    data: dict[str, Any] = change_form_data(client, change_url(event))
    data.update(changes)
    return client.post(change_url(event), data, follow=True)


def upload(name: str, data: bytes, content_type: str = "image/png") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type=content_type)


def errors_of(response: Any) -> str:
    form = response.context["adminform"].form
    return str(form.errors)


def last_record(event: Event) -> AuditRecord:
    return AuditRecord.objects.filter(event=event).order_by("-seq").first()


def test_the_look_is_saved_through_the_service_and_audited(boss, event) -> None:
    response = save(
        boss,
        event,
        accent_color="#1d4ed8",
        intro_text="**Presale** today",
        next_steps_text="You get 10 minutes.",
    )
    assert response.status_code == 200
    event.refresh_from_db()
    assert (event.accent_color, event.intro_text, event.next_steps_text) == (
        "#1d4ed8",
        "**Presale** today",
        "You get 10 minutes.",
    )
    changes = last_record(event).data["changes"]
    assert changes["accent_color"] == ["", "#1d4ed8"]
    assert changes["intro_text"] == ["", "**Presale** today"]
    assert "warning" not in [m.level_tag for m in response.context["messages"]]


@pytest.mark.parametrize(
    ("name", "data", "content_type", "served_as"),
    [
        ("logo.png", TINY_PNG, "image/png", "image/png"),
        ("logo.jpg", JPEG, "image/jpeg", "image/jpeg"),
        ("logo.gif", GIF, "image/gif", "image/gif"),
        ("logo.webp", WEBP, "image/webp", "image/webp"),
        # The type is read from the bytes: neither the name nor the browser's type counts.
        ("logo.svg", TINY_PNG, "image/svg+xml", "image/png"),
        ("logo", JPEG, "application/octet-stream", "image/jpeg"),
    ],
)
def test_a_raster_logo_is_kept_with_its_digest(
    boss, event, name, data, content_type, served_as
) -> None:
    response = save(boss, event, logo=upload(name, data, content_type))
    assert response.status_code == 200
    assert response.redirect_chain, errors_of(response)
    event.refresh_from_db()
    assert event.logo_sha256 == hashlib.sha256(data).hexdigest()
    logo = EventLogo.objects.get(event=event)
    assert (logo.content_type, bytes(logo.data)) == (served_as, data)
    record = last_record(event)
    assert record.action == "event_changed" and record.actor == "staff:boss"
    assert record.data == {
        "changes": {"logo_sha256": [None, event.logo_sha256]},
        "logo": {"content_type": served_as, "bytes": len(data)},
    }


@pytest.mark.parametrize(
    ("name", "data", "content_type", "error"),
    [
        ("logo.svg", SVG_WITH_SCRIPT, "image/svg+xml", "PNG, JPEG, GIF or WebP"),
        # Renamed files: the name and the claimed type do not make an image.
        ("logo.png", SVG_WITH_SCRIPT, "image/png", "PNG, JPEG, GIF or WebP"),
        ("logo.png", HTML_PAGE, "image/png", "PNG, JPEG, GIF or WebP"),
        ("logo.jpg", b"MZ\x90\x00 not a picture", "image/jpeg", "PNG, JPEG, GIF or WebP"),
        ("logo.png", b"", "image/png", "empty"),
        ("logo.png", TINY_PNG + b"\x00" * LOGO_MAX_BYTES, "image/png", "the most is 256 KiB"),
    ],
)
def test_anything_but_a_small_raster_image_is_refused_with_a_form_error(
    boss, event, name, data, content_type, error
) -> None:
    records = AuditRecord.objects.filter(event=event).count()
    response = save(boss, event, logo=upload(name, data, content_type), capacity=7)
    assert response.status_code == 200 and not response.redirect_chain
    assert error in errors_of(response)
    event.refresh_from_db()
    assert event.logo_sha256 == "" and event.capacity != 7  # nothing of the form was saved
    assert not EventLogo.objects.exists()
    assert AuditRecord.objects.filter(event=event).count() == records


def test_the_service_refuses_what_the_form_refuses(event) -> None:
    with pytest.raises(ValidationError) as refusal:
        event_logo_change(event=event, actor="t", now=timezone.now(), image=SVG_WITH_SCRIPT)
    assert "logo" in refusal.value.message_dict
    assert not EventLogo.objects.exists()


def test_a_new_logo_replaces_the_old_and_removing_it_clears_both(boss, event) -> None:
    save(boss, event, logo=upload("a.png", TINY_PNG))
    first = Event.objects.get(pk=event.pk).logo_sha256
    badge = badge_png()
    save(boss, event, logo=upload("b.png", badge))
    event.refresh_from_db()
    assert event.logo_sha256 == hashlib.sha256(badge).hexdigest() != first
    assert EventLogo.objects.count() == 1
    page = boss.get(change_url(event)).content.decode()
    assert f'src="/e/{event.slug}/logo/{event.logo_sha256}"' in page  # the current logo

    save(boss, event, remove_logo="on")
    event.refresh_from_db()
    assert event.logo_sha256 == "" and not EventLogo.objects.exists()
    assert last_record(event).data == {
        "changes": {"logo_sha256": [hashlib.sha256(badge).hexdigest(), None]}
    }


def test_uploading_and_removing_at_once_is_refused(boss, event) -> None:
    response = save(boss, event, logo=upload("a.png", TINY_PNG), remove_logo="on")
    assert "not both" in errors_of(response)
    assert not EventLogo.objects.exists()


def test_a_low_contrast_colour_is_saved_with_a_warning(boss, event) -> None:
    response = save(boss, event, accent_color="#ffcc00")
    event.refresh_from_db()
    assert event.accent_color == "#ffcc00"  # a warning, not a refusal
    warnings = [str(m) for m in response.context["messages"] if m.level_tag == "warning"]
    assert len(warnings) == 1 and "1.51:1" in warnings[0] and "4.5:1" in warnings[0]
    # The form shows the check next to the colour too.
    page = boss.get(change_url(event)).content.decode()
    assert "1.51:1 with white (too low: hard to read" in page


def test_a_colour_that_is_not_rrggbb_is_refused(boss, event) -> None:
    response = save(boss, event, accent_color="red;}x")
    assert "A colour like #1d4ed8." in errors_of(response)
    event.refresh_from_db()
    assert event.accent_color == ""


def test_a_new_on_sale_may_get_its_look_and_logo_at_once(boss) -> None:
    response = boss.post(
        "/admin/events/event/add/",
        {
            "slug": "gig",
            "name": "Gig",
            "target_url": "https://shop.example/",
            "capacity": 10,
            "rate_per_minute": 60,
            "session_seconds": 900,
            "heartbeat_seconds": 60,
            "away_seconds": 600,
            "lanes": 1,
            "queue_order": "fifo",
            "max_queue_length": 0,
            "max_wait_seconds": 0,
            "pow_difficulty": 0,
            "max_live_per_address": 0,
            "mode": "queue",
            "reentry_seconds": 0,
            "accent_color": "#7c3aed",
            "intro_text": "Hello",
            "logo": upload("l.png", TINY_PNG),
        },
    )
    assert response.status_code == 302, response.content[:3000]
    event = Event.objects.get(slug="gig")
    assert event.accent_color == "#7c3aed"
    assert event.logo_sha256 == hashlib.sha256(TINY_PNG).hexdigest()
    actions = list(
        AuditRecord.objects.filter(event=event).order_by("seq").values_list("action", flat=True)
    )
    assert actions == ["event_created", "shuffled", "event_changed"]


# --- preview -------------------------------------------------------------------------------


def preview_url(event: Event | None) -> str:
    if event is None:
        return "/admin/events/event/look-preview/"
    return f"/admin/events/event/{event.pk}/look-preview/"


def snapshot(event: Event) -> tuple[Any, ...]:
    row = Event.objects.filter(pk=event.pk).values().get()
    return (
        row,
        AuditRecord.objects.filter(event=event).count(),
        EventLogo.objects.count(),
    )


def test_the_change_form_has_a_preview_button(boss, event) -> None:
    page = boss.get(change_url(event)).content.decode()
    assert f'formaction="{preview_url(event)}"' in page
    assert 'formtarget="_blank"' in page
    add = boss.get("/admin/events/event/add/").content.decode()
    assert f'formaction="{preview_url(None)}"' in add


def test_the_preview_renders_the_unsaved_look_and_saves_nothing(boss, event) -> None:
    event_update(event=event, actor="t", now=timezone.now(), changes={"intro_text": "Saved intro"})
    before = snapshot(event)
    data: dict[str, Any] = change_form_data(boss, change_url(event))
    data.update(
        name="Summer Tour",
        accent_color="#ffcc00",
        intro_text="**Unsaved** intro <script>alert(1)</script>",
        next_steps_text="- pay within 10 minutes",
        logo=upload("new.png", TINY_PNG),
        capacity="1",
    )
    response = boss.post(preview_url(event), data)
    html = response.content.decode()
    assert response.status_code == 200
    assert response["Content-Security-Policy"].startswith("default-src 'self'")
    assert "no-store" in response["Cache-Control"]
    assert "<strong>Unsaved</strong> intro &lt;script&gt;" in html and "<script>alert" not in html
    assert "Saved intro" not in html
    assert "<li>pay within 10 minutes</li>" in html
    assert 'style="--accent: #ffcc00; --accent-strong: #d1a700;"' in html
    assert '<img class="logo" src="data:image/png;base64,' in html and 'alt="Summer Tour"' in html
    assert 'id="contrast-warning"' in html and "1.51:1" in html
    assert "Summer Tour" in html and 'id="position">184<' in html
    assert "waiting.js" not in html  # no live updates for a sample ticket
    assert snapshot(event) == before


def test_the_preview_keeps_the_saved_logo_unless_removed(boss, event) -> None:
    event = event_logo_change(event=event, actor="t", now=timezone.now(), image=TINY_PNG)
    before = snapshot(event)
    saved = f'src="/e/{event.slug}/logo/{event.logo_sha256}"'
    assert saved in boss.post(preview_url(event), {"name": "X"}).content.decode()
    removed = boss.post(preview_url(event), {"name": "X", "remove_logo": "on"}).content.decode()
    assert saved not in removed and 'class="logo"' not in removed
    assert snapshot(event) == before


def test_the_preview_of_a_new_on_sale_works_too(boss) -> None:
    response = boss.post(preview_url(None), {"name": "New gig", "accent_color": "#1d4ed8"})
    assert response.status_code == 200
    assert (
        "New gig" in response.content.decode() and "--accent: #1d4ed8" in response.content.decode()
    )
    assert not Event.objects.exists()


def test_the_preview_shows_what_it_refused(boss, event) -> None:
    before = snapshot(event)
    response = boss.post(
        preview_url(event),
        {
            "name": "X",
            "accent_color": "javascript:alert(1)",
            "logo": upload("evil.png", SVG_WITH_SCRIPT),
        },
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "A colour like #1d4ed8." in html and "PNG, JPEG, GIF or WebP" in html
    assert "--accent" not in html and "data:image" not in html and "<svg" not in html
    assert snapshot(event) == before


def test_only_those_who_may_change_on_sales_may_preview(event) -> None:
    data = {"name": "X", "accent_color": "#1d4ed8"}
    anonymous = Client().post(preview_url(event), data)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    fan = staff_client("fan", staff=False)
    not_staff = fan.post(preview_url(event), data)
    assert not_staff.status_code == 302 and "/admin/login/" in not_staff["Location"]
    assert staff_client("nobody").post(preview_url(event), data).status_code == 403
    assert staff_client("viewer", "view_event").post(preview_url(event), data).status_code == 403
    assert staff_client("viewer2", "view_event").post(preview_url(None), data).status_code == 403
    assert (
        staff_client("changer", "view_event", "change_event")
        .post(preview_url(event), data)
        .status_code
        == 200
    )
    assert staff_client("adder", "add_event").post(preview_url(None), data).status_code == 200
    assert staff_client("adder2", "add_event").post(preview_url(event), data).status_code == 403


def test_the_preview_needs_its_csrf_token_and_a_post(event) -> None:
    admin = staff_client("root", superuser=True, csrf_checks=True)
    assert admin.post(preview_url(event), {"name": "X"}).status_code == 403
    assert admin.get(preview_url(event)).status_code == 405
