"""Staff tokens in the admin: made through the service (the token shown once, in the page's
message), listed, revoked; never edited, and the digest is never shown."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from staff.api_tokens import DEFAULT_DAYS, MAX_DAYS, staff_token_create, staff_token_revoke
from staff.models import StaffToken

SHOWN = (
    "prefix",
    "user",
    "scope",
    "label",
    "created_at",
    "expires_at",
    "revoked_at",
    "last_used_at",
)


class StaffTokenForm(forms.ModelForm):
    days = forms.IntegerField(
        min_value=1,
        max_value=MAX_DAYS,
        initial=DEFAULT_DAYS,
        help_text=f"How long the token works: 1 to {MAX_DAYS} days.",
    )

    class Meta:
        model = StaffToken
        fields = ["user", "scope", "label"]


class StaffTokenAdmin(admin.ModelAdmin):
    list_display = SHOWN
    list_filter = ["scope", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "user__username", "label"]
    list_select_related = ["user"]
    actions = ["revoke"]

    def get_form(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = StaffTokenForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["user", "scope", "label", "days"] if obj is None else SHOWN

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else SHOWN

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list's revoke action needs it; a token itself never changes.
        return obj is None and super().has_change_permission(request)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        made = staff_token_create(
            user=form.cleaned_data["user"],
            scope=form.cleaned_data["scope"],
            days=form.cleaned_data["days"],
            label=form.cleaned_data["label"],
            now=timezone.now(),
        )
        obj.__dict__.update(
            {field.attname: getattr(made.token, field.attname) for field in StaffToken._meta.fields}
        )
        obj._state.adding = False
        messages.warning(request, f"The new token, shown this once (copy it now): {made.plain}")

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[StaffToken]) -> None:
        now = timezone.now()
        revoked = sum(
            staff_token_revoke(token_id=pk, now=now) for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)
