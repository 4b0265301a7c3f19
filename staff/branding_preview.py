"""The on-sale's branding in the admin: the logo's upload fields, the contrast check, and the
preview of the fans' page with the form's unsaved values (docs/api.md, "Your own look")."""

from __future__ import annotations

import base64
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext

from events.models import BRANDING_TEXT_MAX_LENGTH, LOGO_MAX_BYTES, Event
from queueing.line.answers import TicketAnswer
from queueing.records.entry_reads import anyone_joined
from queueing.rules.branding import (
    LogoRefused,
    accent_contrast,
    accent_warning,
    logo_check,
    page_branding,
)
from queueing.rules.errors import LanesFixed, QueueOrderFixed
from queueing.rules.eta import Eta
from queueing.rules.states import EntryStatus
from queueing.rules.wording import StatusKind, status_text, wait_range_text
from queueing.web.branding import logo_url

LOGO_HELP = (
    f"PNG, JPEG, GIF or WebP, at most {LOGO_MAX_BYTES // 1024} KiB, shown at the top of the "
    "fans' pages with the on-sale's name as its text alternative. SVG is refused."
)


def logo_read(upload: UploadedFile | None) -> bytes | None:
    """The bytes of an uploaded logo once they pass the room's checks (the type is read from
    the bytes themselves, never from the file's name or the type the browser sent)."""
    if upload is None:
        return None
    # Refused before reading when the upload says it is too large; read one byte past the
    # limit otherwise, so a size that lied is caught all the same.
    if upload.size is not None and upload.size > LOGO_MAX_BYTES:
        raise ValidationError(
            f"The logo is {upload.size // 1024} KiB; the most is {LOGO_MAX_BYTES // 1024} KiB."
        )
    upload.seek(0)
    data = upload.read(LOGO_MAX_BYTES + 1)
    try:
        logo_check(data, max_bytes=LOGO_MAX_BYTES)
    except LogoRefused as refusal:
        raise ValidationError(str(refusal)) from refusal
    return data


class LookFieldsMixin(forms.Form):
    """The form fields of the look that are not columns of Event (the logo lives apart)."""

    logo = forms.FileField(required=False, help_text=LOGO_HELP)
    remove_logo = forms.BooleanField(required=False, label="Remove the logo")

    def clean_logo(self) -> bytes | None:
        return logo_read(self.cleaned_data.get("logo"))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("logo") and cleaned.get("remove_logo"):
            raise ValidationError("Upload a new logo or remove the logo, not both.")
        return cleaned


class EventAdminForm(LookFieldsMixin, forms.ModelForm):
    class Meta:
        model = Event
        # The admin's fieldsets name the fields (and its widgets' overrides apply to them).
        fields: tuple[str, ...] = ()

    def clean_lanes(self) -> int:
        """Refused here, as a form error, rather than by the service on save (LanesFixed):
        each fan's lane was drawn from the count, so it is fixed once anyone is in line."""
        lanes: int = self.cleaned_data["lanes"]
        saved = self.instance
        if saved.pk is not None and lanes != saved.lanes and anyone_joined(saved.pk):
            raise ValidationError(gettext(LanesFixed.default_detail), code="lanes_fixed")
        return lanes

    def clean_queue_order(self) -> str:
        """Refused here, as a form error, rather than by the service on save
        (QueueOrderFixed): a change would reorder the fans already in line."""
        order: str = self.cleaned_data["queue_order"]
        saved = self.instance
        if saved.pk is not None and order != saved.queue_order and anyone_joined(saved.pk):
            raise ValidationError(gettext(QueueOrderFixed.default_detail), code="queue_order_fixed")
        return order

    def clean_traffic_rules(self) -> object:
        # An emptied box is no rules; the model's validation gives every fault's message.
        rules = self.cleaned_data.get("traffic_rules")
        return [] if rules is None else rules


def logo_change_requested(form: forms.Form) -> tuple[bool, bytes | None]:
    """Whether the saved form changes the logo, and the new bytes (None: remove it)."""
    if form.cleaned_data.get("logo"):
        return True, form.cleaned_data["logo"]
    return bool(form.cleaned_data.get("remove_logo")), None


def contrast_display(event: Event) -> str:
    """The saved colour's contrast with white, as shown next to the field."""
    if not event.accent_color:
        return "The room's own green (9.1:1 with white)."
    ratio = accent_contrast(event.accent_color)
    verdict = "too low: hard to read" if accent_warning(event.accent_color) else "fine"
    return f"{ratio:.2f}:1 with white ({verdict}; 4.5:1 or more is needed)."


def logo_display(event: Event) -> str:
    url = logo_url(event)
    if not url:
        return "No logo."
    return format_html(
        '<img src="{}" alt="Current logo" style="max-height: 4.5rem; max-width: 16rem">', url
    )


# --- preview -------------------------------------------------------------------------------

_ACCENT_FIELD = Event._meta.get_field("accent_color")


class LookPreviewForm(LookFieldsMixin):
    """The change form's look fields, as sent by its Preview button: validated as the admin's
    form validates them, and never saved."""

    name = forms.CharField(max_length=200, required=False)
    accent_color = forms.CharField(
        max_length=7, required=False, validators=list(_ACCENT_FIELD.validators)
    )
    intro_text = forms.CharField(max_length=BRANDING_TEXT_MAX_LENGTH, required=False)
    next_steps_text = forms.CharField(max_length=BRANDING_TEXT_MAX_LENGTH, required=False)


# What the preview shows of a line: a fan well into it, as most fans see the page.
SAMPLE_POSITION = 184
SAMPLE_FIRST_POSITION = 290
SAMPLE_QUEUE_LENGTH = 1250
SAMPLE_ETA = Eta(p10=6 * 60, p50=8 * 60, p90=11 * 60)


def _preview_logo(form: LookPreviewForm, saved: Event | None) -> str:
    upload = form.cleaned_data.get("logo") if "logo" in form.cleaned_data else None
    if upload:
        # Not stored anywhere: shown inline (the page's CSP allows data: images), after the
        # same checks a saved logo passes.
        content_type = logo_check(upload, max_bytes=LOGO_MAX_BYTES)
        return f"data:{content_type};base64,{base64.b64encode(upload).decode()}"
    if form.cleaned_data.get("remove_logo") or saved is None:
        return ""
    return logo_url(saved)


def _preview_value(form: LookPreviewForm, name: str, saved: Event | None) -> str:
    if name in form.cleaned_data:
        return form.cleaned_data[name] or ""
    # A value the form refused is left out of the page (its error is shown instead).
    return getattr(saved, name) if saved is not None and name != "name" else ""


def branding_preview_response(request: HttpRequest, saved: Event | None) -> HttpResponse:
    """The fans' waiting page with the form's unsaved look and sample figures. Reads the
    request and the saved on-sale (for its slug and current logo); writes nothing."""
    form = LookPreviewForm(request.POST, request.FILES)
    form.is_valid()
    errors = [
        f"{form.fields[name].label or name.replace('_', ' ').capitalize()}: {message}"
        if name != "__all__"
        else message
        for name, messages in form.errors.items()
        for message in messages
    ]
    now = timezone.now()
    event = Event(
        slug=saved.slug if saved is not None else "preview",
        name=_preview_value(form, "name", saved) or (saved.name if saved else "Your on-sale"),
    )
    branding = page_branding(
        accent=_preview_value(form, "accent_color", saved),
        intro=_preview_value(form, "intro_text", saved),
        next_steps=_preview_value(form, "next_steps_text", saved),
        logo_url=_preview_logo(form, saved),
    )
    view = TicketAnswer(
        ticket="preview",
        event_slug=event.slug,
        status=EntryStatus.WAITING,
        position=SAMPLE_POSITION,
        queue_length=SAMPLE_QUEUE_LENGTH,
        poll_after_seconds=5,
        eta=SAMPLE_ETA,
    )
    progress = round(100 * (SAMPLE_FIRST_POSITION - SAMPLE_POSITION) / SAMPLE_FIRST_POSITION)
    context = {
        "event": event,
        "state": "open",
        "now": now,
        "maintenance": False,
        "opens_at": None,
        "branding": branding,
        "preview": True,
        "preview_errors": errors,
        "view": view,
        "status": view.status.value,
        "session_cut_short": False,
        "status_text": status_text(StatusKind.IN_LINE),
        "wait_kind": "estimate",
        "wait_text": wait_range_text(SAMPLE_ETA),
        "offer_phone": True,
        "progress": progress,
        "refresh_seconds": 5,
    }
    response = render(request, "queueing/waiting.html", context, status=400 if errors else 200)
    # The admin's pages go without the room's CSP; this one shows the fans' page, so it gets
    # theirs (which is also what lets the unsaved logo show as a data: URL).
    response["Content-Security-Policy"] = settings.WR_CONTENT_SECURITY_POLICY
    response["Cache-Control"] = "no-store"
    return response
