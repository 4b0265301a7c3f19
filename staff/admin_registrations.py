"""A draw's registrations in the admin: the on-sale's window shown on its change form (set on
the dashboard's on-sale page, or the staff API, through the one audited service), and the
registrations read-only and paged, without their addresses or identity hashes."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from events.models import Event
from queueing.models import Registration, RegistrationWindow


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
        "close the room draws who may join the line. The window is set on the dashboard "
        "(or the staff API), audited; it cannot change once drawn.",
    },
)


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
