"""The browsable API reference for staff: Swagger UI over the room's OpenAPI document
(``/api/schema/``), served from the room itself (drf-spectacular-sidecar's copy of Swagger UI,
through staticfiles) so that it runs under the pages' Content-Security-Policy, which allows
scripts from 'self' only: the page's own start-up script is fetched as a file too
(``?script``), never inlined.

Signed-in staff only (anyone else: the sign-in page). "Try it out" calls the API with the
reader's own session, so what it may do is what their permissions allow, audited as theirs.
"""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.urls import reverse_lazy
from django.views.decorators.cache import never_cache
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAdminUser

# The page and its start-up script are the reader's own session's: no token form to fill in.
# Never cached: the script carries the reader's CSRF token.
api_reference = staff_member_required(
    never_cache(
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema",
            title="Waiting room API",
            authentication_classes=[SessionAuthentication],
            permission_classes=[IsAdminUser],
        )
    ),
    login_url=reverse_lazy("dashboard-sign-in"),
)
