"""Staff and auditors signing in through the company's OpenID Connect provider
(mozilla-django-oidc: the code flow with state, nonce and PKCE; docs/operations.md, "Staff
sign-in"). Off unless ``OIDC_CLIENT_ID`` is set.

Who may come in is the provider's word, read at every sign-in: its groups claim, mapped to
the room's roles by ``OIDC_GROUP_MAP``. An account is made at the first sign-in (named
``oidc:<sub>``, with no password, found again by the provider's subject, never by e-mail, which
a provider may let people change), and its roles are set again at each: a person the
provider took out of every mapped group is refused, and loses what the room had given them."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from dashboard.permissions import AUDITORS_GROUP

logger = logging.getLogger(__name__)

USERNAME_PREFIX = "oidc:"
REFUSAL_KEY = "oidc_refusal"
# Between the provider's clock and the room's.
CLOCK_SKEW_SECONDS = 60


@dataclass(frozen=True)
class Role:
    group: str | None
    permissions: tuple[str, ...] = ()
    staff: bool = False
    superuser: bool = False


# The room's roles (OIDC_GROUP_MAP's right-hand side; their names: settings.OIDC_ROLES). Each
# is a group of the room's own, so that the admin shows who holds what and why.
ROLES: dict[str, Role] = {
    "viewer": Role(group="viewers", permissions=("view_event",), staff=True),
    "staff": Role(
        group="staff", permissions=("view_event", "add_event", "change_event"), staff=True
    ),
    "integration-keys": Role(
        group="integration key managers",
        permissions=("view_event", "manage_integration_key"),
        staff=True,
    ),
    "auditor": Role(group=AUDITORS_GROUP),
    "superuser": Role(group=None, staff=True, superuser=True),
}
ROLE_GROUPS = {role.group for role in ROLES.values() if role.group}

# The discovery document's names for the library's endpoint settings.
_DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


@cache
def discovery(issuer: str) -> dict[str, Any]:
    """The provider's discovery document, read once per process (an endpoint moves only with
    a restart of the room)."""
    response = requests.get(
        f"{issuer}/.well-known/openid-configuration", timeout=settings.OIDC_TIMEOUT
    )
    response.raise_for_status()
    document = response.json()
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        raise ImproperlyConfigured(
            f"OIDC_ISSUER is {issuer!r} but the provider says {document.get('issuer')!r}"
        )
    return document


def provider_setting(attr: str, *args: Any) -> Any:
    """The library's setting, an endpoint left empty taken from the issuer's discovery."""
    value = import_from_settings(attr, *args)
    if attr in _DISCOVERED and not value and settings.OIDC_ISSUER:
        return discovery(settings.OIDC_ISSUER)[_DISCOVERED[attr]]
    return value


def roles_of(claims: dict[str, Any]) -> set[str]:
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(groups, str):
        groups = [groups]
    mapping = settings.OIDC_GROUP_MAP
    return {role for group in groups for role in mapping.get(str(group), ())}


def _role_group(role: Role) -> Group:
    group, _ = Group.objects.get_or_create(name=role.group)
    # Each time, not only when made: the role's rights are the room's, not an admin's edit.
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="events", codename__in=role.permissions)
    )
    return group


@transaction.atomic
def account_roles_set(*, user: Any, roles: set[str]) -> None:
    """The account holds exactly these roles of the room (its other groups are left alone)."""
    chosen = [ROLES[name] for name in sorted(roles)]
    keep = user.groups.exclude(name__in=ROLE_GROUPS)
    user.groups.set([*keep, *(_role_group(role) for role in chosen if role.group)])
    user.is_staff = any(role.staff for role in chosen)
    user.is_superuser = any(role.superuser for role in chosen)
    user.save(update_fields=["is_staff", "is_superuser"])


class RoomOIDCBackend(OIDCAuthenticationBackend):
    """The library's backend, reading the provider's settings only when a sign-in comes back
    from it: Django builds every backend for each password login too, which must not wait on
    (or fail with) the provider."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = get_user_model()

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return provider_setting(attr, *args)

    OIDC_OP_TOKEN_ENDPOINT = property(lambda self: provider_setting("OIDC_OP_TOKEN_ENDPOINT"))
    OIDC_OP_USER_ENDPOINT = property(lambda self: provider_setting("OIDC_OP_USER_ENDPOINT"))
    OIDC_OP_JWKS_ENDPOINT = property(lambda self: provider_setting("OIDC_OP_JWKS_ENDPOINT"))
    OIDC_RP_CLIENT_ID = property(lambda self: settings.OIDC_RP_CLIENT_ID)
    OIDC_RP_CLIENT_SECRET = property(lambda self: settings.OIDC_RP_CLIENT_SECRET)
    OIDC_RP_SIGN_ALGO = property(lambda self: settings.OIDC_RP_SIGN_ALGO)
    OIDC_RP_IDP_SIGN_KEY = None

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        # Only the callback's call (it passes the nonce); a password login is not ours.
        if "nonce" not in kwargs:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except (SuspiciousOperation, requests.RequestException) as refusal:
            # A forged or stale answer, or the provider unreachable: back to the sign-in page.
            logger.warning("OIDC sign-in failed: %s", refusal)
            return None

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library checks the signature and the nonce; the rest of what the standard asks
        of an ID token is checked here: for this client, from this issuer, not expired."""
        payload: dict[str, Any] = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        if settings.OIDC_RP_CLIENT_ID not in (
            audience if isinstance(audience, list) else [audience]
        ):
            raise SuspiciousOperation("the ID token is for another client")
        if settings.OIDC_ISSUER and str(payload.get("iss", "")).rstrip("/") != settings.OIDC_ISSUER:
            raise SuspiciousOperation("the ID token is from another issuer")
        if float(payload.get("exp", 0)) < time.time() - CLOCK_SKEW_SECONDS:
            raise SuspiciousOperation("the ID token has expired")
        return payload

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(username=self._username(claims))

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub"))

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        # The ID token's claims (checked: signature, audience, nonce) under userinfo's: some
        # providers (Entra ID) put the groups in the ID token only.
        userinfo = self.get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo is about someone else than the ID token")
        claims = {**payload, **userinfo}
        if not self.verify_claims(claims):
            return None
        roles = roles_of(claims)
        user = self.filter_users_by_claims(claims).first()
        if not roles:
            logger.warning("OIDC sign-in refused: %s is in no mapped group", claims["sub"])
            self.request.session[REFUSAL_KEY] = "no_role"
            if user is not None:
                account_roles_set(user=user, roles=set())
            return None
        if user is None:
            user = self.UserModel.objects.create_user(self._username(claims))
            user.set_unusable_password()
        user.email = str(claims.get("email", ""))[:254]
        user.first_name = str(claims.get("given_name") or claims.get("name") or "")[:150]
        user.last_name = str(claims.get("family_name", ""))[:150]
        user.save()
        account_roles_set(user=user, roles=roles)
        logger.info("OIDC sign-in: %s as %s", user.username, ", ".join(sorted(roles)))
        return user

    def _username(self, claims: dict[str, Any]) -> str:
        return f"{USERNAME_PREFIX}{claims['sub']}"[:150]


def _enabled(view: Any) -> Any:
    """404 while single sign-on is off; the sign-in page, saying so, while the provider cannot
    be reached (its discovery document is read on the first sign-in)."""

    def dispatch(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        try:
            return view(request, *args, **kwargs)
        except requests.RequestException as failure:
            logger.warning("OIDC provider unreachable: %s", failure)
            request.session[REFUSAL_KEY] = "unreachable"
            return HttpResponseRedirect(settings.LOGIN_REDIRECT_URL_FAILURE)

    return dispatch


class RoomOIDCAuthenticate(OIDCAuthenticationRequestView):
    get_settings = staticmethod(provider_setting)


class RoomOIDCCallback(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(provider_setting)


oidc_authenticate = _enabled(RoomOIDCAuthenticate.as_view())
oidc_callback = _enabled(RoomOIDCCallback.as_view())


def sign_in_choices(request: HttpRequest) -> dict[str, Any]:
    """What the sign-in pages (the dashboard's and the admin's) show besides the password:
    the provider's button, and why the last sign-in through it was refused."""
    if not settings.OIDC_ENABLED:
        return {}
    refusal = request.session.pop(REFUSAL_KEY, None) if request.GET.get("oidc") else None
    return {
        "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
        "oidc_refused": bool(request.GET.get("oidc")),
        "oidc_no_role": refusal == "no_role",
        "oidc_unreachable": refusal == "unreachable",
    }
