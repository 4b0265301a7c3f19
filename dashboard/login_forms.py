"""Password login forms, throttled per account and per client address
(``dashboard/login_throttle.py``): the admin's (staff only) and the dashboard's sign-in for
auditors who are not staff. Both count every password they check the same way."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from dashboard.login_throttle import (
    login_attempt_begin,
    login_attempt_failed,
    login_attempt_succeeded,
)
from queueing.rules.errors import RateLimited


class ThrottledLogin(AuthenticationForm):
    """Counts the outcome of each password the form checks. While the account or address is
    locked out no password is checked at all, the right one included."""

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
            # A wrong password, an inactive account, or someone who may not sign in here: all
            # the same answer and the same count, so the page tells nothing about the account.
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


class ThrottledAdminAuthenticationForm(ThrottledLogin, AdminAuthenticationForm):
    """The admin's login (staff only), throttled."""


def lockout_status(response: Any) -> None:
    """A login page whose form was refused for a lockout answers 429 with Retry-After: the
    status a client can act on."""
    form = (getattr(response, "context_data", None) or {}).get("form")
    retry_after = getattr(form, "lockout_retry_after", None)
    if retry_after:
        response.status_code = 429
        response["Retry-After"] = str(retry_after)
