"""A draw's registrations in the admin: the on-sale's window on its change form, shown and
set there as on the dashboard's on-sale page and the staff API (their checks, and the one
audited service), read-only once drawn; and the registrations read-only and paged, without
their addresses or identity hashes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ObjectDoesNotExist
from django.forms import BaseInlineFormSet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from events.models import Event
from queueing.line.registration import WINDOW_FIELDS, registration_window_set
from queueing.models import Registration, RegistrationWindow
from staff.registration_api import WindowInputSerializer


def registration_window_shown(event: Event | None) -> str:
    """The window in one paragraph, and where to set it."""
    if event is None or event.pk is None:
        return "Save the on-sale first; then set a window on its dashboard page to sell by a draw."
    link = reverse("dashboard-event", kwargs={"slug": event.slug}) + "#registration"
    window = RegistrationWindow.objects.filter(event=event).first()
    if window is None:
        return format_html(
            'None: sold first come. <a href="{}">Set a registration window</a> to sell by a draw.',
            link,
        )
    drawn = (
        f"drawn {timezone.localtime(window.drawn_at):%d %b %Y %H:%M}, "
        f"{window.list_count} in the list, root {window.list_root}"
        if window.drawn_at is not None
        else "not drawn yet"
    )
    return format_html(
        "From {} to {}; {} winners and {} waitlisted per tier; invitations last {} h; "
        'shop route {}; {}. <a href="{}">On the dashboard</a>.',
        f"{timezone.localtime(window.opens_at):%d %b %Y %H:%M}",
        f"{timezone.localtime(window.closes_at):%d %b %Y %H:%M %Z}",
        window.winners,
        window.waitlist,
        window.invitation_hours,
        "on" if window.shop_key else "off",
        drawn,
        link,
    )


REGISTRATION_FIELDSET: tuple[str, dict[str, Any]] = (
    "Registration and draw",
    {
        "fields": ("draw_window",),
        "description": "An on-sale sold by a draw: fans register in a window, and at its "
        "close the room draws who may join the line. The window is set below (or on the "
        "dashboard, or with the staff API), audited; it cannot change once drawn.",
    },
)

# What the window shows once drawn, read-only: the draw's commitment beside its settings.
DRAWN_FIELDS = ("drawn_at", "list_root", "list_count")


def _drawn(event: Event | None) -> bool:
    if event is None or event.pk is None:
        return False
    return RegistrationWindow.objects.filter(event=event, drawn_at__isnull=False).exists()


class RegistrationWindowAdminForm(forms.ModelForm):
    """The window's settings, and its shop key write-only: never shown (not even as a
    password field's value); empty keeps the key there is."""

    new_shop_key = forms.CharField(
        required=False,
        strip=False,
        label="New shop key",
        help_text="Leave empty to keep the current key. 32 to 256 characters; never shown.",
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    remove_shop_key = forms.BooleanField(
        required=False, label="Turn the shop's route off (remove its key)"
    )

    class Meta:
        model = RegistrationWindow
        fields = WINDOW_FIELDS
        labels = {  # as on the dashboard's form
            "closes_at": "Closes (the draw follows at once)",
            "winners": "Winners per tier",
            "waitlist": "Waitlist per tier",
            "invitation_hours": "An invitation lasts (hours)",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("new_shop_key") and data.get("remove_shop_key"):
            self.add_error("new_shop_key", "Give a key, or turn the route off: not both.")
        if all(name in data for name in WINDOW_FIELDS):
            # The staff API's own checks (bounds, order), so that the two cannot drift.
            body: dict[str, Any] = {name: data[name] for name in WINDOW_FIELDS}
            if data.get("new_shop_key"):
                body["shop_key"] = data["new_shop_key"]
            checked = WindowInputSerializer(data=body)
            if not checked.is_valid():
                for name, messages in checked.errors.items():
                    field = "new_shop_key" if name == "shop_key" else name
                    self.add_error(field if field in self.fields else None, messages)
        return data

    def service_fields(self) -> dict[str, Any]:
        """The service's ``fields``: the shop key only when it changes ("" turns it off)."""
        fields = {name: self.cleaned_data[name] for name in WINDOW_FIELDS}
        if self.cleaned_data.get("remove_shop_key"):
            fields["shop_key"] = ""
        elif self.cleaned_data.get("new_shop_key"):
            fields["shop_key"] = self.cleaned_data["new_shop_key"]
        return fields


def registration_window_formset_save(
    formset: BaseInlineFormSet, *, event: Event, actor: str, now: datetime
) -> None:
    """The inline saved through the service (audited as the API's ``registration_window_set``),
    never by the formset: a window drawn meanwhile raises ``DrawDone``. The formset is told
    what was saved, as its own ``save`` would, for the admin's history of the on-sale."""
    formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
    for form in formset.forms:
        if not form.has_changed():
            continue
        adding = form.instance._state.adding
        window = registration_window_set(
            event=event, actor=actor, now=now, fields=form.service_fields()
        )
        if adding:
            formset.new_objects.append(window)
        else:
            formset.changed_objects.append((window, form.changed_data))


class RegistrationWindowInline(admin.StackedInline):
    """The on-sale's window on its change form. Changed with the right to change the on-sale
    (as the staff API's ``PUT``), seen with the right to see it; read-only once drawn."""

    model = RegistrationWindow
    form = RegistrationWindowAdminForm
    fk_name = "event"
    max_num = 1
    extra = 1  # an empty form while there is no window: left empty, none is made
    can_delete = False
    verbose_name = verbose_name_plural = "Registration window"
    readonly_fields = ("shop_key_state", *DRAWN_FIELDS)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if _drawn(obj):
            return (*WINDOW_FIELDS, "shop_key_state", *DRAWN_FIELDS)
        return (*WINDOW_FIELDS, "shop_key_state", "new_shop_key", "remove_shop_key")

    @admin.display(description="Shop key")
    def shop_key_state(self, obj: RegistrationWindow) -> str:
        return "set (the shop's route is on)" if obj.shop_key else "not set (no shop route)"

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        user = request.user
        return any(user.has_perm(f"events.{name}_event") for name in ("view", "change"))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("events.change_event")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm("events.change_event") and not _drawn(obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Registration)
class RegistrationAdmin(admin.ModelAdmin):
    """Read-only and paged: the list never counts itself whole (a draw may hold millions)."""

    show_full_result_count = False
    list_per_page = 100
    list_display = (
        "public_hash",
        "event",
        "tier",
        "route",
        "status",
        "outcome",
        "draw_rank",
        "invitation_status",
        "created_at",
    )
    list_filter = ("status", "outcome", "route", "event")
    list_select_related = ("event", "tier", "invitation")
    search_fields = ("=public_hash",)
    # The published list's order (the unique index on the on-sale and the hash).
    ordering = ("public_hash",)
    # Never the address nor the identity hash: the published hash names a registration.
    fields = (
        "id",
        "event",
        "tier",
        "route",
        "status",
        "created_at",
        "confirmed_at",
        "public_hash",
        "outcome",
        "draw_rank",
        "invitation_status",
        "mailed",
    )
    readonly_fields = fields

    @admin.display(description="Invitation")
    def invitation_status(self, obj: Registration) -> str:
        try:
            return obj.invitation.status
        except ObjectDoesNotExist:
            return "–"

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Whoever may see on-sales sees their registrations' counts on the dashboard, which
        # links here for the registrations one by one.
        user = request.user
        return super().has_view_permission(request, obj) or any(
            user.has_perm(f"events.{name}_event") for name in ("view", "change")
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
