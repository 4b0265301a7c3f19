"""The room's admin site: Django's, with its password login throttled per account and per
client address (``dashboard/login_forms.py``). ``/dashboard/`` sends staff to this login; the
report after the sale sends auditors to the dashboard's own sign-in, throttled the same way
(``dashboard/sign_in.py``). DRF's token and session authentication check no password."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from dashboard.login_forms import ThrottledAdminAuthenticationForm, lockout_status
from dashboard.oidc import sign_in_choices


class WaitingRoomAdminSite(admin.AdminSite):
    login_form = ThrottledAdminAuthenticationForm

    @method_decorator(never_cache)
    @login_not_required
    def login(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), **sign_in_choices(request)}
        response = super().login(request, extra_context)
        lockout_status(response)
        return response
