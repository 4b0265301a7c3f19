"""The admin's webhook endpoints (saved, rotated and removed through staff/webhooks.py) and
their deliveries, read-only with every attempt: what staff see of what the room sent.

A new endpoint's signing secret, and a rotated one, is shown once on a page of its own,
never in a message (messages may be kept in a cookie)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from queueing.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from queueing.rules.webhooks import WEBHOOK_TYPES
from staff import webhooks


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=500, assume_scheme="https")
    types = forms.MultipleChoiceField(
        choices=[(name, f"{name}: {meaning}") for name, meaning in WEBHOOK_TYPES.items()],
        widget=forms.CheckboxSelectMultiple,
    )

    class Meta:
        model = WebhookEndpoint
        fields = ("event", "url", "types", "description", "enabled")

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        refusal = webhooks.endpoint_url_refusal(url)
        if refusal:
            raise ValidationError(refusal)
        return url


def _secrets_page(
    modeladmin: admin.ModelAdmin, request: HttpRequest, shown: list[Any], *, rotated: bool
) -> TemplateResponse:
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Signing secret: shown once",
        "opts": modeladmin.model._meta,
        "shown": shown,
        "rotated": rotated,
    }
    return TemplateResponse(request, "admin/queueing/webhookendpoint/secret_shown.html", context)


@admin.action(description="Rotate the signing secret (shown once)", permissions=("change",))
def rotate_secrets(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[WebhookEndpoint]
) -> TemplateResponse:
    now = timezone.now()
    shown = [webhooks.endpoint_rotate_secret(endpoint=e, now=now) for e in queryset]
    return _secrets_page(modeladmin, request, shown, rotated=True)


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ("url", "event", "enabled", "failures_in_a_row", "description", "created_at")
    list_filter = ("enabled", "event")
    list_select_related = ("event",)
    readonly_fields = ("disabled_reason", "failures_in_a_row", "created_at", "created_by")
    actions = (rotate_secrets,)

    def save_model(
        self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool
    ) -> None:
        fields = {name: form.cleaned_data[name] for name in WebhookEndpointForm.Meta.fields}
        if change:
            saved = webhooks.endpoint_update(endpoint=obj, changes=fields)
        else:
            made = webhooks.endpoint_create(
                actor=f"staff:{request.user.get_username()}", now=timezone.now(), **fields
            )
            saved = made.endpoint
            request._webhook_secret_shown = made  # type: ignore[attr-defined]
        obj.pk, obj.id = saved.pk, saved.pk

    def response_add(self, request: HttpRequest, obj: WebhookEndpoint, *args: Any) -> HttpResponse:
        made = getattr(request, "_webhook_secret_shown", None)
        if made is None:
            return super().response_add(request, obj, *args)
        return _secrets_page(self, request, [made], rotated=False)

    def delete_model(self, request: HttpRequest, obj: WebhookEndpoint) -> None:
        webhooks.endpoint_delete(endpoint=obj)


class WebhookAttemptInline(admin.TabularInline):
    model = WebhookAttempt
    extra = 0
    can_delete = False
    fields = ("number", "started_at", "duration_ms", "status_code", "error", "response_excerpt")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("created_at", "type", "endpoint", "state", "attempts", "due_at", "delivered_at")
    list_filter = ("state", "type", "endpoint")
    list_select_related = ("endpoint",)
    search_fields = ("=public_id",)
    readonly_fields = (
        "public_id",
        "endpoint",
        "type",
        "state",
        "attempts",
        "due_at",
        "created_at",
        "delivered_at",
        "body",
    )
    inlines = (WebhookAttemptInline,)

    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Whoever may see the endpoints may see what was sent to them.
        return super().has_view_permission(request, obj) or request.user.has_perm(
            "queueing.view_webhookendpoint"
        )
