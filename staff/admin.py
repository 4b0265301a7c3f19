"""The Django admin of the room: on-sales (saves and actions go through the services, so
that they are audited), and read-only views of the line and its audit trail."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone

from events.models import AccessCode, Event, Tier
from queueing.models import AuditRecord, QueueEntry, RegistrationWindow
from queueing.rules.branding import accent_warning
from queueing.rules.errors import DrawDone
from staff import services
from staff.admin_close import close_events_confirmed
from staff.admin_fieldsets import EVENT_FIELDSETS
from staff.admin_filters import StateFilter, state_label
from staff.admin_queueit import EventQueueitAdminForm, QueueitSecretShown
from staff.admin_registrations import (
    REGISTRATION_FIELDSET,
    RegistrationWindowInline,
    registration_window_formset_save,
    registration_window_shown,
)
from staff.admin_sold_out import sell_out_events
from staff.admin_tiers import TierInline
from staff.admin_tokens import StaffTokenAdmin
from staff.admin_webhooks import WebhookEndpointAdmin  # noqa: F401 (registers the webhooks')
from staff.branding_preview import (
    branding_preview_response,
    contrast_display,
    logo_change_requested,
    logo_display,
)
from staff.models import StaffToken


class AccessCodeInline(admin.TabularInline):
    model = AccessCode
    extra = 0
    fields = ("code", "tier")

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tier":
            event_id = (
                request.resolver_match.kwargs.get("object_id") if request.resolver_match else None
            )
            kwargs["queryset"] = Tier.objects.filter(event_id=event_id)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class EventActionForm(ActionForm):
    count = forms.IntegerField(
        min_value=1,
        max_value=services.ADMIT_NOW_MAX,
        required=False,
        label="N (for “admit N now”)",
    )


def _actor(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


@admin.register(Event)
class EventAdmin(QueueitSecretShown, admin.ModelAdmin):
    form = EventQueueitAdminForm
    # Adds the "Preview" button (staff/branding_preview.py).
    change_form_template = "admin/events/event/change_form.html"

    class Media:
        js = ("staff/branding_admin.js", "staff/line_preview_admin.js")

    list_display = (
        "name",
        "slug",
        "state",
        "control",
        "mode",
        "capacity_shown",
        "rate_shown",
        "prequeue_opens_at",
        "starts_at",
    )
    list_filter = (StateFilter, "control", "mode")
    search_fields = ("slug", "name")
    list_per_page = 50
    readonly_fields = (
        "integration_key",
        "control",
        "closed_at",
        "sold_out_at",
        "sold_out_message",
        "created_at",
        "updated_at",
        "accent_contrast",
        "current_logo",
        "queueit_secret_state",
        "draw_window",
    )
    inlines = [TierInline, AccessCodeInline, RegistrationWindowInline]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    actions = [
        "pause_events",
        "resume_events",
        "close_events",
        sell_out_events,
        "admit_now",
        "rotate_keys",
    ]
    action_form = EventActionForm
    fieldsets = (*EVENT_FIELDSETS, REGISTRATION_FIELDSET)

    @admin.display(description="State")
    def state(self, obj: Event) -> str:
        return state_label(obj)

    @admin.display(description="Capacity", ordering="capacity")
    def capacity_shown(self, obj: Event) -> str:
        return f"{obj.capacity:,}" if obj.capacity else "No cap"

    @admin.display(description="Rate / min", ordering="rate_per_minute")
    def rate_shown(self, obj: Event) -> str:
        return f"{obj.rate_per_minute:,}" if obj.rate_per_minute else "No pace limit"

    @admin.display(description="Contrast")
    def accent_contrast(self, obj: Event) -> str:
        return contrast_display(obj)

    @admin.display(description="Registration window")
    def draw_window(self, obj: Event | None) -> str:
        return registration_window_shown(obj)

    @admin.display(description="Current logo")
    def current_logo(self, obj: Event) -> str:
        return logo_display(obj)

    def get_urls(self) -> list[URLPattern]:
        preview = self.admin_site.admin_view(self.branding_preview)
        return [
            # The paths keep the word docs/api.md gives them ("look"): a contract.
            path("look-preview/", preview, name="events_event_branding_preview_new"),
            path("<path:object_id>/look-preview/", preview, name="events_event_branding_preview"),
            *super().get_urls(),
        ]

    def branding_preview(self, request: HttpRequest, object_id: str | None = None) -> HttpResponse:
        """The Preview button: the fans' page with the form's unsaved look; saves nothing.
        Only for those who may change the on-sale (or, for a new one, add on-sales)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        saved = self.get_object(request, object_id) if object_id is not None else None
        if object_id is not None and saved is None:
            raise PermissionDenied
        allowed = (
            self.has_change_permission(request, saved)
            if saved is not None
            else self.has_add_permission(request) or self.has_change_permission(request)
        )
        if not allowed:
            raise PermissionDenied
        return branding_preview_response(request, saved)

    def get_fieldsets(self, request: HttpRequest, obj: Event | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if self.has_manage_integration_key_permission(request):
            return fieldsets
        # The key lets its holder end fans' sessions on the shop's behalf: shown only to
        # staff allowed to manage it, as in the staff API.
        return [
            (name, {**options, "fields": [f for f in options["fields"] if f != "integration_key"]})
            for name, options in fieldsets
        ]

    def has_manage_integration_key_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("events.manage_integration_key")

    def get_inline_instances(self, request: HttpRequest, obj: Event | None = None) -> list[Any]:
        # A new on-sale gets its default tier from the service; tiers are edited afterwards.
        return super().get_inline_instances(request, obj) if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Event, form: ModelForm, change: bool) -> None:
        fields = {
            name: form.cleaned_data[name]
            for name in services.EDITABLE_FIELDS
            if name in form.cleaned_data
        }
        fields.update(QueueitSecretShown.secret_key_change(form))
        now = timezone.now()
        if change:
            updated = services.event_update(
                event=obj, actor=_actor(request), now=now, changes=fields
            )
        else:
            name, target_url = fields.pop("name"), fields.pop("target_url")
            updated = services.event_create(
                actor=_actor(request),
                now=now,
                slug=obj.slug,
                name=name,
                target_url=target_url,
                **fields,
            )
        changes_logo, image = logo_change_requested(form)
        if changes_logo:
            updated = services.event_logo_change(
                event=updated, actor=_actor(request), now=now, image=image
            )
        obj.pk = updated.pk
        obj.refresh_from_db()
        warning = accent_warning(obj.accent_color)
        if warning:
            # Staff's choice stands; they are told, not refused.
            self.message_user(request, warning, messages.WARNING)

    def save_formset(
        self, request: HttpRequest, form: ModelForm, formset: BaseInlineFormSet, change: bool
    ) -> None:
        if formset.model is RegistrationWindow:
            try:
                registration_window_formset_save(
                    formset, event=form.instance, actor=_actor(request), now=timezone.now()
                )
            except DrawDone as refusal:  # drawn since the form was shown
                self.message_user(request, refusal.detail, messages.ERROR)
            return
        super().save_formset(request, form, formset, change)
        if formset.has_changed():
            services.event_record_admin_change(
                event=form.instance,
                actor=_actor(request),
                now=timezone.now(),
                what=f"{formset.model._meta.verbose_name_plural} edited",
            )

    def _control(
        self, request: HttpRequest, queryset: QuerySet[Event], service: Any, verb: str
    ) -> None:
        now = timezone.now()
        for event in queryset:
            service(event=event, actor=_actor(request), now=now)
        self.message_user(request, f"{verb} {queryset.count()} on-sale(s).", messages.SUCCESS)

    @admin.action(description="Pause admission", permissions=("change",))
    def pause_events(self, request: HttpRequest, queryset: QuerySet[Event]) -> None:
        self._control(request, queryset, services.EVENT_CONTROLS["pause"], "Paused")

    @admin.action(description="Resume admission", permissions=("change",))
    def resume_events(self, request: HttpRequest, queryset: QuerySet[Event]) -> None:
        self._control(request, queryset, services.EVENT_CONTROLS["resume"], "Resumed")

    @admin.action(
        description="Admit N now (bypasses the rate, never the capacity)", permissions=("change",)
    )
    def admit_now(self, request: HttpRequest, queryset: QuerySet[Event]) -> None:
        count = request.POST.get("count", "")
        if not count.isdigit() or not 1 <= int(count) <= services.ADMIT_NOW_MAX:
            self.message_user(request, "Give N, the number of fans to admit.", messages.ERROR)
            return
        for event in queryset:
            outcome = services.event_admit_now(
                event=event, count=int(count), actor=_actor(request), now=timezone.now()
            )
            self.message_user(
                request,
                f"{event.name}: admitted {len(outcome.admitted)}"
                + (f" ({outcome.skipped})" if outcome.skipped else ""),
                messages.SUCCESS,
            )

    @admin.action(
        description="Close (send home everyone in line; asks first)", permissions=("change",)
    )
    def close_events(
        self, request: HttpRequest, queryset: QuerySet[Event]
    ) -> TemplateResponse | None:
        return close_events_confirmed(self, request, queryset, _actor(request))

    @admin.action(
        description="Rotate the integration key (the old one stops working)",
        permissions=("manage_integration_key",),
    )
    def rotate_keys(self, request: HttpRequest, queryset: QuerySet[Event]) -> None:
        self._control(request, queryset, services.integration_key_rotate, "Rotated the key of")


class ReadOnlyAdmin(admin.ModelAdmin):
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(QueueEntry)
class QueueEntryAdmin(ReadOnlyAdmin):
    list_display = ("public_id", "event", "tier", "status", "order_key", "joined_at", "admitted_at")
    list_filter = ("status", "event")
    search_fields = ("=public_id",)
    list_select_related = ("event", "tier")


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin):
    list_display = ("at", "event", "lane", "seq", "action", "actor", "ticket_id")
    list_filter = ("action", "event", ("at", admin.DateFieldListFilter))
    search_fields = ("=ticket_id",)
    list_select_related = ("event",)
    ordering = ("-id",)


admin.site.register(StaffToken, StaffTokenAdmin)
