"""The room's admin site: Django's, with its password login throttled per account and per
client address (``dashboard/login_throttle.py``). ``/dashboard/`` sends staff to this login, so
it is the room's only password login; DRF's token and session authentication check no
password."""

from __future__ import annotations

import time
from typing import Any

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from dashboard.login_throttle import (
    login_attempt_begin,
    login_attempt_failed,
    login_attempt_succeeded,
)
from queueing.rules.errors import RateLimited


class ThrottledAdminAuthenticationForm(AdminAuthenticationForm):
    """The admin's login form, counting the outcome of each password it checks. While the
    account or address is locked out no password is checked at all, the right one included."""

    # Set when this form was refused for a lockout: the page answers 429 with Retry-After.
    lockout_retry_after: int | None = None

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if self.request is None or username is None or not password:
            # Django checks no password for an incomplete form: nothing to count.
            return super().clean()
        try:
            attempt = login_attempt_begin(request=self.request, username=username, now=time.time())
        except RateLimited as refusal:
            raise self._locked_out(refusal) from None
        try:
            cleaned = super().clean()
        except ValidationError:
            # A wrong password, an inactive account, or someone who is not staff: all the same
            # answer and the same count, so the page tells nothing about the account.
            try:
                login_attempt_failed(attempt=attempt, now=time.time())
            except RateLimited as refusal:
                raise self._locked_out(refusal) from None
            raise
        login_attempt_succeeded(attempt=attempt)
        return cleaned

    def _locked_out(self, refusal: RateLimited) -> ValidationError:
        self.lockout_retry_after = refusal.retry_after
        return ValidationError(refusal.detail, code="login_lockout")


class WaitingRoomAdminSite(admin.AdminSite):
    login_form = ThrottledAdminAuthenticationForm

    @method_decorator(never_cache)
    @login_not_required
    def login(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().login(request, extra_context)
        form = (getattr(response, "context_data", None) or {}).get("form")
        retry_after = getattr(form, "lockout_retry_after", None)
        if retry_after:
            # The login page, with the lockout as its error, as the status a client can act on.
            response.status_code = 429
            response["Retry-After"] = str(retry_after)
        return response
