"""An on-sale's branding on the fans' pages, and its logo served by the room (docs/api.md,
"Your own look")."""

from __future__ import annotations

import re

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from events.models import Event, EventLogo
from queueing.rules.branding import PageBranding, page_branding

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# The logo's URL names its digest, so a new logo is a new URL: browsers and proxies may keep
# this one for good.
LOGO_CACHE_CONTROL = "public, max-age=31536000, immutable"
# Whatever the bytes hide, opened on its own the logo may run nothing, load nothing, and is
# shown in a sandbox (a unique origin without script).
LOGO_CONTENT_SECURITY_POLICY = "default-src 'none'; sandbox"


def logo_url(event: Event) -> str:
    if not event.logo_sha256:
        return ""
    return reverse("event-logo", args=[event.slug, event.logo_sha256])


def event_branding(event: Event) -> PageBranding:
    """The branding of ``event``'s pages, from the on-sale alone (no query: the logo is a URL)."""
    return page_branding(
        accent=event.accent_color,
        intro=event.intro_text,
        next_steps=event.next_steps_text,
        logo_url=logo_url(event),
    )


@require_http_methods(["GET", "HEAD"])
def event_logo(request: HttpRequest, slug: str, sha256: str) -> HttpResponse:
    """``GET /e/{slug}/logo/{sha256}``: the on-sale's current logo; 404 for any other digest
    (an old logo is gone with its URL)."""
    if not _SHA256.match(sha256):
        raise Http404("No such logo")
    etag = f'"{sha256}"'
    logo = (
        EventLogo.objects.filter(event__slug=slug, event__logo_sha256=sha256)
        .values_list("content_type", "data")
        .first()
    )
    if logo is None:
        raise Http404("No such logo")
    if request.headers.get("If-None-Match") == etag:
        response: HttpResponse = HttpResponseNotModified()
    else:
        content_type, data = logo
        response = HttpResponse(bytes(data), content_type=content_type)
    response["ETag"] = etag
    response["Cache-Control"] = LOGO_CACHE_CONTROL
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = LOGO_CONTENT_SECURITY_POLICY
    return response
