"""The admin's tiers of an on-sale (an inline of its change form). At most one tier takes
the fans without an access code: a second one ticked is refused in words (the database's
partial unique index is not checked by Django's formsets, so it would otherwise surface as
a server error), and moving the default from one tier to another is saved in an order the
index accepts."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms import BaseInlineFormSet

from events.models import Tier


def _one_default_message() -> str:
    constraint = next(c for c in Tier._meta.constraints if c.name == "one_default_tier_per_event")
    return constraint.get_violation_error_message()


class TierFormSet(BaseInlineFormSet):
    def _kept_defaults(self) -> list[Any]:
        return [
            form
            for form in self.forms
            if form.cleaned_data.get("is_default") and not form.cleaned_data.get("DELETE")
        ]

    def clean(self) -> None:
        super().clean()
        if len(self._kept_defaults()) > 1:
            raise ValidationError(_one_default_message())

    def save(self, commit: bool = True) -> list[Any]:
        # The tier giving up the default is let go first, whatever order the forms are in.
        kept = [form.instance.pk for form in self._kept_defaults() if form.instance.pk]
        Tier.objects.filter(event=self.instance, is_default=True).exclude(pk__in=kept).update(
            is_default=False
        )
        return super().save(commit)


class TierInline(admin.TabularInline):
    model = Tier
    formset = TierFormSet
    extra = 0
    fields = ("name", "priority", "share", "is_default")
