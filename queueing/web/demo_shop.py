"""A stand-in for the shop behind the room, so that `make run` shows the whole journey.

It does what an integrator's shop does: verifies the pass offline against the room's published
JWKS (fetched over HTTP and cached, like any JWT library's JWKS client), and reports the
outcome to ``passes/complete`` with the event's integration key. Being inside the project, it
reads that key from the database; a real shop keeps it in its own configuration.
"""

from __future__ import annotations

import functools
import json
import urllib.error
import urllib.request

import jwt
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from events.models import Event

JWKS_CACHE_SECONDS = 300


@functools.cache
def _jwks_client() -> jwt.PyJWKClient:
    return jwt.PyJWKClient(
        f"{settings.WR_PUBLIC_URL}/.well-known/jwks.json",
        cache_jwk_set=True,
        lifespan=JWKS_CACHE_SECONDS,
        timeout=5,
    )


def _verify_offline(token: str, slug: str) -> dict[str, object]:
    key = _jwks_client().get_signing_key_from_jwt(token)
    return jwt.decode(
        token,
        key,
        algorithms=["EdDSA", "RS256"],
        audience=slug,
        issuer=settings.WR_PUBLIC_URL,
    )


@require_GET
def checkout(request: HttpRequest, slug: str) -> HttpResponse:
    token = request.GET.get("wr_pass", "")
    try:
        claims = _verify_offline(token, slug)
    except (jwt.PyJWTError, jwt.PyJWKClientError) as error:
        return render(
            request, "demo_shop/refused.html", {"slug": slug, "reason": str(error)}, status=403
        )
    return render(
        request,
        "demo_shop/checkout.html",
        {"slug": slug, "claims": claims, "token": token},
    )


@require_POST
def complete(request: HttpRequest, slug: str) -> HttpResponse:
    token = request.POST.get("wr_pass", "")
    outcome = "abandoned" if request.POST.get("outcome") == "abandoned" else "completed"
    event = Event.objects.filter(slug=slug).first()
    if event is None:
        return render(
            request, "demo_shop/refused.html", {"slug": slug, "reason": "no such shop"}, status=404
        )
    call = urllib.request.Request(
        f"{settings.WR_PUBLIC_URL}/api/v1/passes/complete",
        data=json.dumps({"pass": token, "outcome": outcome}).encode(),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {event.integration_key}",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(call, timeout=5) as response:
            ok = response.status == 204
    except urllib.error.URLError:
        ok = False
    return render(request, "demo_shop/done.html", {"slug": slug, "ok": ok, "outcome": outcome})
