"""Read-only admin of staff login lockouts."""

from __future__ import annotations

from django.contrib import admin

from dashboard.models import LoginLockout
from staff.admin import ReadOnlyAdmin


@admin.register(LoginLockout)
class LoginLockoutAdmin(ReadOnlyAdmin):
    list_display = ("at", "scope", "username", "address", "failures", "locked_until")
    list_filter = ("scope", ("at", admin.DateFieldListFilter))
    search_fields = ("username", "address", "address_bucket")
    ordering = ("-id",)
