"""The admin's Queue-it settings (docs/queueit.md): the customer and event ids are plain
fields; the secret key is write-only. The form never shows it (not even as the value of a
password field): it says whether one is set, takes a new one, or clears it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from events.models import Event
from staff.branding_preview import EventAdminForm

# The fieldset the on-sale's admin page shows them in.
QUEUEIT_FIELDSET = (
    "Queue-it connector",
    {
        "fields": (
            "queueit_customer_id",
            "queueit_event_id",
            "queueit_secret_state",
            "queueit_new_secret_key",
            "queueit_clear_secret_key",
        ),
        "description": "For a shop that runs Queue-it's connector: give the customer id and "
        "secret key it is configured with, and point its queue domain at this room. The "
        "event id defaults to the slug in lower case (docs/queueit.md).",
    },
)


class EventQueueitAdminForm(EventAdminForm):
    queueit_new_secret_key = forms.CharField(
        required=False,
        strip=False,
        max_length=128,
        label="New Queue-it secret key",
        help_text="Leave empty to keep the current key. 16 to 128 printable ASCII characters.",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    queueit_clear_secret_key = forms.BooleanField(
        required=False, label="Remove the Queue-it secret key (turns the surface off)"
    )

    def clean_queueit_new_secret_key(self) -> str:
        value: str = self.cleaned_data.get("queueit_new_secret_key", "")
        if value:
            for validator in Event._meta.get_field("queueit_secret_key").validators:
                try:
                    validator(value)
                except ValidationError as error:
                    raise ValidationError(error.messages) from error
        return value


class QueueitSecretShown:
    """The on-sale admin's part: whether a key is set (a read-only field), and the change the
    saved form asks for."""

    @admin.display(description="Queue-it secret key")
    def queueit_secret_state(self, obj: Event) -> str:
        return "set" if obj.queueit_secret_key else "not set"

    @staticmethod
    def secret_key_change(form: forms.Form) -> dict[str, Any]:
        """{} (keep the key), or the new value ("" clears it)."""
        new = form.cleaned_data.get("queueit_new_secret_key")
        if new:
            return {"queueit_secret_key": new}
        if form.cleaned_data.get("queueit_clear_secret_key"):
            return {"queueit_secret_key": ""}
        return {}
