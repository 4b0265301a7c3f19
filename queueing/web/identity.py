"""Who is joining: a logged-in user, else the signed waiting-room cookie, else the
``Idempotency-Key`` header; a browser without any of them gets a new cookie."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from queueing.web.api_errors import ApiError

_COOKIE_SALT = "waitingroom.identity.v1"
_IDEMPOTENCY_KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")


@dataclass(frozen=True)
class Identity:
    digest: str  # what is stored: sha256 of "<kind>:<value>"
    new_cookie_token: str | None  # set on the response when the identity is a new cookie


def _digest(kind: str, value: str) -> str:
    return hashlib.sha256(f"{kind}:{value}".encode()).hexdigest()


def identity_from_request(request: HttpRequest) -> Identity:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Identity(digest=_digest("user", str(user.pk)), new_cookie_token=None)
    token = request.get_signed_cookie(settings.WR_IDENTITY_COOKIE, default=None, salt=_COOKIE_SALT)
    if token:
        return Identity(digest=_digest("cookie", token), new_cookie_token=None)
    key = request.headers.get("Idempotency-Key")
    if key is not None:
        if not _IDEMPOTENCY_KEY_RE.match(key):
            raise ApiError(
                400, "bad_request", "Idempotency-Key must be 1-255 printable ASCII characters."
            )
        return Identity(digest=_digest("idempotency", key), new_cookie_token=None)
    token = secrets.token_urlsafe(24)
    return Identity(digest=_digest("cookie", token), new_cookie_token=token)


def identity_remember(response: HttpResponse, identity: Identity) -> None:
    if identity.new_cookie_token is None:
        return
    response.set_signed_cookie(
        settings.WR_IDENTITY_COOKIE,
        identity.new_cookie_token,
        salt=_COOKIE_SALT,
        max_age=settings.WR_IDENTITY_COOKIE_MAX_AGE,
        httponly=True,
        samesite="Lax",
        secure=settings.SESSION_COOKIE_SECURE,
    )
