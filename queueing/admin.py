"""Read-only admin views of the line and its audit trail."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from queueing.models import AuditRecord, QueueEntry


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
    list_display = ("at", "event", "seq", "action", "actor", "ticket_id")
    list_filter = ("action", "event", ("at", admin.DateFieldListFilter))
    search_fields = ("=ticket_id",)
    list_select_related = ("event",)
    ordering = ("-id",)
