"""A stand-in for the shop behind the room, so that `make run` shows the whole journey.

It does what an integrator's shop does: verifies the pass offline against the room's published
JWKS (fetched over HTTP and cached, like any JWT library's JWKS client), then asks the room
online (``passes/verify``) whether the session is still open, since a pass stays
cryptographically valid after it was completed or revoked; and reports the outcome to
``passes/complete`` with the event's integration key. Every call to the room is real HTTP to
``WR_PUBLIC_URL``. Being inside the project, it reads the key from the database; a real shop
keeps it in its own configuration.
"""

from __future__ import annotations

import functools
import http.client
import json
import urllib.error
import urllib.request

import jwt
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from events.models import Event
from queueing.web.middleware import kept_out_of_caches

JWKS_CACHE_SECONDS = 300
ROOM_TIMEOUT_SECONDS = 5


class RoomUnreachable(Exception):
    """The room did not answer, or not with what its API promises."""


@functools.cache
def _jwks_client(url: str) -> jwt.PyJWKClient:
    return jwt.PyJWKClient(url, cache_jwk_set=True, lifespan=JWKS_CACHE_SECONDS, timeout=5)


def _verify_offline(token: str, slug: str) -> dict[str, object]:
    key = _jwks_client(f"{settings.WR_PUBLIC_URL}/.well-known/jwks.json").get_signing_key_from_jwt(
        token
    )
    return jwt.decode(
        token,
        key,
        algorithms=["EdDSA"],
        audience=slug,
        issuer=settings.WR_PUBLIC_URL,
    )


def _room_post(path: str, body: dict[str, str], *, key: str | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    call = urllib.request.Request(
        f"{settings.WR_PUBLIC_URL}{path}",
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(call, timeout=ROOM_TIMEOUT_SECONDS) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    # URLError, timeouts and dropped connections are OSErrors; a cut-off body is not.
    except (OSError, http.client.HTTPException) as error:
        raise RoomUnreachable(str(error)) from error


def _verify_online(token: str, slug: str) -> str | None:
    """The room's verdict: None while the session is open, else its reason."""
    status, body = _room_post("/api/v1/passes/verify", {"pass": token, "event": slug})
    try:
        verdict = json.loads(body)
    except ValueError as error:
        raise RoomUnreachable("the room's answer was not JSON") from error
    if status != 200 or not isinstance(verdict, dict) or "valid" not in verdict:
        raise RoomUnreachable(f"the room answered {status}")
    return None if verdict["valid"] is True else str(verdict.get("reason") or "invalid")


def _refused(request: HttpRequest, slug: str, reason: str, status: int) -> HttpResponse:
    return render(
        request, "demo_shop/refused.html", {"slug": slug, "reason": reason}, status=status
    )


def _admitted(request: HttpRequest, slug: str, token: str) -> dict[str, object] | HttpResponse:
    """The pass's claims, or the page refusing it. Refuses when the room cannot say (a shop
    that sold on an unconfirmed pass could sell twice)."""
    try:
        claims = _verify_offline(token, slug)
    except (jwt.PyJWTError, jwt.PyJWKClientError) as error:
        return _refused(request, slug, str(error), 403)
    try:
        reason = _verify_online(token, slug)
    except RoomUnreachable:
        return render(request, "demo_shop/unconfirmed.html", {"slug": slug}, status=503)
    if reason is not None:
        return _refused(request, slug, f"the waiting room says: {reason}", 403)
    return claims


@kept_out_of_caches  # the page holds the pass (its form hands it to "complete")
@require_GET
def checkout(request: HttpRequest, slug: str) -> HttpResponse:
    token = request.GET.get("wr_pass", "")
    claims = _admitted(request, slug, token)
    if isinstance(claims, HttpResponse):
        return claims
    return render(
        request,
        "demo_shop/checkout.html",
        {"slug": slug, "claims": claims, "token": token},
    )


@kept_out_of_caches
@require_POST
def complete(request: HttpRequest, slug: str) -> HttpResponse:
    token = request.POST.get("wr_pass", "")
    outcome = "abandoned" if request.POST.get("outcome") == "abandoned" else "completed"
    event = Event.objects.filter(slug=slug).first()
    if event is None:
        return _refused(request, slug, "no such shop", 404)
    # A replayed form must not sell again: the session has to be open right now.
    claims = _admitted(request, slug, token)
    if isinstance(claims, HttpResponse):
        return claims
    try:
        status, _body = _room_post(
            "/api/v1/passes/complete",
            {"pass": token, "outcome": outcome},
            key=event.integration_key,
        )
    except RoomUnreachable:
        status = 0
    return render(
        request, "demo_shop/done.html", {"slug": slug, "ok": status == 204, "outcome": outcome}
    )
