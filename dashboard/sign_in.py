"""The dashboard's own sign-in, for auditors who are not staff (the admin's login admits
staff only): the report after the sale sends them here. Any active account may sign in; what
it may then read is decided by each page (dashboard/permissions.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LoginView
from django.http import HttpResponse
from django.urls import reverse_lazy
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from dashboard.login_forms import ThrottledLogin, lockout_status


@method_decorator([never_cache, login_not_required], name="dispatch")
class SignInView(LoginView):
    form_class = ThrottledLogin
    template_name = "dashboard/sign_in.html"
    # Without a (safe) ``next``: staff land on the dashboard, which sends others to its login.
    next_page = reverse_lazy("dashboard")

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        response.render()
        lockout_status(response)
        return response
