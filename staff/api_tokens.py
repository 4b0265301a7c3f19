"""API tokens for the staff and auditors' APIs (docs/api.md, "Authentication"): made, checked
and revoked here, and the one rule of what each scope lets through.

A token reads ``wrt_<prefix>_<secret>``. Only the prefix (to find the row) and the SHA-256 of
the whole token are stored: a copy of the database hands out no working token. Each token has
a scope, an expiry (at most ``MAX_DAYS``) and may be revoked; ``last_used_at`` is written at
most once a minute, so a busy script costs no write per request.

The scope is checked where the token is, in ``StaffTokenAuthentication``, not in each view's
permissions: every DRF view gets it, a new one included, whatever its ``permission_classes``.
A view says what it needs with ``required_scope`` (a scope, or a scope per method); without
one, reads need ``read`` and anything else ``control``. The auditors' views need ``audit``.
Sessions are not scoped: a person signed in has what their account has."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request

from staff.models import StaffToken, TokenScope

logger = logging.getLogger(__name__)

DEFAULT_DAYS = 90
MAX_DAYS = 365
LAST_USED_EVERY = timedelta(minutes=1)
TOKEN_HEAD = "wrt_"
KEYWORDS = (b"token", b"bearer")
# Before tokens had a scope and an expiry: DRF's authtoken, 40 hex digits kept in plain text.
_OLD_TOKEN = re.compile(r"^[0-9a-f]{40}$")
_TOKEN = re.compile(r"^wrt_(?P<prefix>[0-9a-f]{12})_[A-Za-z0-9_-]{43}$")
HOW_TO_GET_ONE = (
    "Ask an administrator for a new one (manage.py staff_token create, or the admin's "
    "Staff tokens)."
)


class TokenRefused(Exception):
    """The token is unknown, expired or revoked; the message says which, for the 401."""


@dataclass(frozen=True)
class NewToken:
    token: StaffToken
    # The only time the token exists outside its holder's hands: shown once, never stored.
    plain: str


def _digest(plain: str) -> str:
    return hashlib.sha256(plain.encode()).hexdigest()


def staff_token_create(
    *,
    user: AbstractBaseUser,
    scope: TokenScope | str,
    days: int = DEFAULT_DAYS,
    label: str = "",
    now: datetime,
) -> NewToken:
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"A token lasts 1 to {MAX_DAYS} days.")
    scope = TokenScope(scope)
    for _ in range(3):
        prefix = secrets.token_hex(6)
        plain = f"{TOKEN_HEAD}{prefix}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                token = StaffToken.objects.create(
                    user=user,
                    prefix=prefix,
                    digest=_digest(plain),
                    scope=scope,
                    label=label,
                    created_at=now,
                    expires_at=now + timedelta(days=days),
                )
        except IntegrityError:
            continue  # the prefix was taken (one chance in 2^48 per token): draw again
        logger.info(
            "staff token %s made for %s: scope %s, %d days", prefix, user, scope.value, days
        )
        return NewToken(token=token, plain=plain)
    raise RuntimeError("no free token prefix after three draws")


def staff_token_revoke(*, token_id: int, now: datetime) -> bool:
    """Compare-and-set: True only for the call that revoked it."""
    revoked = StaffToken.objects.filter(pk=token_id, revoked_at__isnull=True).update(revoked_at=now)
    if revoked:
        logger.info("staff token %s revoked", token_id)
    return bool(revoked)


def staff_token_check(*, plain: str, now: datetime) -> StaffToken:
    """The token's row if the token is good now; ``TokenRefused`` otherwise."""
    if _OLD_TOKEN.match(plain):
        raise TokenRefused(
            "This is an old API token: the room no longer accepts tokens without an expiry "
            f"and a scope. {HOW_TO_GET_ONE}"
        )
    match = _TOKEN.match(plain)
    token = (
        StaffToken.objects.select_related("user").filter(prefix=match["prefix"]).first()
        if match
        else None
    )
    if token is None or not hmac.compare_digest(token.digest, _digest(plain)):
        raise TokenRefused("Invalid token.")
    if token.revoked_at is not None:
        raise TokenRefused(f"This token was revoked. {HOW_TO_GET_ONE}")
    if token.expires_at <= now:
        raise TokenRefused(f"This token expired. {HOW_TO_GET_ONE}")
    if not token.user.is_active:
        raise TokenRefused("User inactive or deleted.")
    _note_use(token, now)
    return token


def _note_use(token: StaffToken, now: datetime) -> None:
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_EVERY:
        return
    # Conditional, so that requests arriving together write once between them.
    StaffToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_EVERY)
    ).update(last_used_at=now)


def scope_required(view: Any, method: str) -> TokenScope:
    declared = getattr(view, "required_scope", None)
    if isinstance(declared, Mapping):
        declared = declared.get(method)
    if declared:
        return TokenScope(declared)
    return TokenScope.READ if method in SAFE_METHODS else TokenScope.CONTROL


def scope_allows(held: str, required: TokenScope) -> bool:
    # control includes read; audit is a world of its own (the auditors' API only).
    return held == required or (held == TokenScope.CONTROL and required == TokenScope.READ)


class StaffTokenAuthentication(BaseAuthentication):
    """``Authorization: Token wrt_…`` (or ``Bearer wrt_…``): the token's account, limited to
    what the token's scope lets through on this view (403 otherwise)."""

    def authenticate(self, request: Request) -> tuple[Any, StaffToken] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise AuthenticationFailed("Invalid token header: 'Token <token>'.")
        try:
            plain = parts[1].decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid token.") from None
        try:
            token = staff_token_check(plain=plain, now=timezone.now())
        except TokenRefused as refusal:
            raise AuthenticationFailed(str(refusal)) from None
        view = (request.parser_context or {}).get("view")
        required = scope_required(view, request.method or "GET")
        if not scope_allows(token.scope, required):
            raise PermissionDenied(
                f"This token's scope is '{token.scope}'; this needs '{required.value}'."
            )
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return "Token"


class StaffTokenScheme(OpenApiAuthenticationExtension):
    target_class = StaffTokenAuthentication
    name = "staffToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token wrt_…`: a staff token with its scope (docs/api.md).",
        }
