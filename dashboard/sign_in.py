"""The dashboard's own sign-in, for auditors who are not staff (the admin's login admits
staff only): the report after the sale sends them here, and they land on their own page
(dashboard/audit_home.py). Any active account may sign in; what it may then read is decided
by each page (dashboard/permissions.py). With single sign-on on, the page also offers the
company's provider (dashboard/oidc.py). Signing out is a POST (CSRF-checked), from the header
of every dashboard page."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LoginView, LogoutView
from django.http import HttpResponse
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from dashboard.login_forms import ThrottledLogin, lockout_status
from dashboard.oidc import sign_in_choices
from dashboard.permissions import is_auditor


@method_decorator([never_cache, login_not_required], name="dispatch")
class SignInView(LoginView):
    form_class = ThrottledLogin
    template_name = "dashboard/sign_in.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), **sign_in_choices(self.request)}

    def get_default_redirect_url(self) -> str:
        """Without a (safe) ``next``: staff land on the dashboard, auditors on their own page
        (dashboard/audit_home.py), and anyone else on the dashboard, which refuses them."""
        user = self.request.user
        if not user.is_staff and is_auditor(user):
            return reverse("dashboard-audit")
        return reverse("dashboard")

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        response.render()
        lockout_status(response)
        return response


class SignOutView(LogoutView):
    """Django's: POST only, so that no link or image elsewhere can sign anyone out."""

    next_page = "dashboard-sign-in"
