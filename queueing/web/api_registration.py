"""Fans registering for a draw over HTTP (docs/api.md, "Registration and the draw"): one view
per operation, each calling one service of queueing/line/registration.py."""

from __future__ import annotations

import hashlib
from typing import Any, ClassVar

from django.conf import settings
from django.http import HttpResponse
from django.utils import timezone
from django.utils.translation import get_language
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from events.validation import ACCESS_CODE_MAX_LENGTH
from queueing.line.invitations import invitation_redeem
from queueing.line.reads import event_by_slug
from queueing.line.registration import Registered, registration_confirm, registration_create
from queueing.rules.registrations import EMAIL_MAX_LENGTH
from queueing.web.abuse import join_rate_check, pow_check
from queueing.web.api_errors import errors
from queueing.web.api_fan import join_response
from queueing.web.callers import Identity


class RegistrationInputSerializer(serializers.Serializer):
    email = serializers.CharField(max_length=EMAIL_MAX_LENGTH, required=False)
    shop_token = serializers.CharField(max_length=4096, required=False)
    access_code = serializers.CharField(
        max_length=ACCESS_CODE_MAX_LENGTH, required=False, allow_null=True
    )
    # As a join's (docs/api.md, "Proof of work"), when the on-sale asks for one.
    pow = serializers.JSONField(required=False, allow_null=True)


class InvitationOutputSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="single use: joins the line in the tier")
    expires_at = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=["sent", "used", "lapsed"])


class RegistrationMailedSerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=["check_mail"],
        help_text="the same for a new address and one registered already: see the mail",
    )
    detail = serializers.CharField()


class RegistrationOutputSerializer(serializers.Serializer):
    registration = serializers.UUIDField()
    status = serializers.ChoiceField(choices=["pending", "confirmed"])
    tier = serializers.CharField()
    hash = serializers.CharField(help_text="the registration's published hash")
    outcome = serializers.ChoiceField(
        choices=["won", "waitlisted", "lost"], allow_null=True, help_text="null until the draw"
    )
    invitation = InvitationOutputSerializer(
        allow_null=True,
        help_text="to the registrant only (a shop token signed again, the mailed link opened "
        "again), once invited",
    )


def registration_output(registered: Registered) -> dict[str, Any]:
    invitation = registered.invitation
    return {
        "registration": str(registered.registration.id),
        "status": registered.registration.status,
        "tier": registered.tier,
        "hash": registered.hash,
        "outcome": registered.registration.outcome or None,
        "invitation": None
        if invitation is None
        else {
            "code": invitation.code,
            "expires_at": invitation.expires_at.isoformat(),
            "status": invitation.status,
        },
    }


def registration_rate_identity(claimed: str) -> str:
    """Whom a registration's join limits count: what is registered (an address, a shop
    token), as the page's form and the API alike spend it."""
    return hashlib.sha256(f"registration:{claimed.strip().lower()}".encode()).hexdigest()


class RegistrationCreateApi(APIView):
    """``POST /api/v1/events/{slug}/registrations``: 201 a new registration, 200 the
    identity's existing one."""

    authentication_classes: ClassVar[list[type]] = []
    permission_classes: ClassVar[list[type[BasePermission]]] = [AllowAny]

    @extend_schema(
        operation_id="registration_create",
        tags=["fans"],
        request=RegistrationInputSerializer,
        responses={
            201: RegistrationOutputSerializer,
            200: RegistrationOutputSerializer,
            202: RegistrationMailedSerializer,
            **errors(400, 401, 404, 409),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        serializer = RegistrationInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        event = event_by_slug(slug)
        # The door's defences of a join, spent from the same budgets: per client address, and
        # per what is registered (so one address or account cannot be tried without end).
        claimed = data.get("email") or data.get("shop_token") or ""
        join_rate_check(request=request._request, identity=registration_rate_identity(claimed))
        pow_check(event=event, proof=data.get("pow"))
        registered = registration_create(
            event=event,
            now=timezone.now(),
            email=data.get("email"),
            shop_token=data.get("shop_token"),
            access_code=data.get("access_code"),
            # The request's language (Accept-Language, negotiated as for the fans' pages by
            # LocaleMiddleware): the confirmation and outcome mails speak it.
            language=get_language() or settings.LANGUAGE_CODE,
        )
        if registered.registration.route == "email":
            # The same answer whether the address is new or had registered: whoever knows an
            # address learns nothing of its registration here (not whether there is one, nor
            # its id or state). Its owner reads it through the mailed link.
            return Response(
                {
                    "status": "check_mail",
                    "detail": "A link to confirm the registration is mailed to the address.",
                },
                status=202,
            )
        return Response(registration_output(registered), status=201 if registered.created else 200)


class RegistrationConfirmApi(APIView):
    """``/api/v1/registrations/confirm/{token}``: the link mailed to an address. GET is what
    a mail client opens; confirming is idempotent (a compare-and-set), so opening it twice,
    or a mail scanner opening it first, changes nothing more."""

    authentication_classes: ClassVar[list[type]] = []
    permission_classes: ClassVar[list[type[BasePermission]]] = [AllowAny]

    @extend_schema(
        operation_id="registration_confirm",
        tags=["fans"],
        responses={200: RegistrationOutputSerializer, **errors(401, 409)},
    )
    def get(self, request: Request, token: str) -> Response:
        return self.post(request, token)

    @extend_schema(
        operation_id="registration_confirm_post",
        tags=["fans"],
        request=None,
        responses={200: RegistrationOutputSerializer, **errors(401, 409)},
    )
    def post(self, request: Request, token: str) -> Response:
        return Response(registration_output(registration_confirm(token=token, now=timezone.now())))


class InvitationInputSerializer(serializers.Serializer):
    code = serializers.CharField(max_length=64)


class InvitationJoinApi(APIView):
    """``POST /api/v1/events/{slug}/invitations/join``: the invitation's code joins the line,
    as ``join`` does, with the registration's own identity (one ticket per registration)."""

    authentication_classes: ClassVar[list[type]] = []
    permission_classes: ClassVar[list[type[BasePermission]]] = [AllowAny]

    @extend_schema(
        operation_id="invitation_join",
        tags=["fans"],
        request=InvitationInputSerializer,
        responses={201: OpenApiTypes.OBJECT, 200: OpenApiTypes.OBJECT, **errors(400, 404, 409)},
    )
    def post(self, request: Request, slug: str) -> HttpResponse:
        serializer = InvitationInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        redeemed = invitation_redeem(
            event=event_by_slug(slug), code=serializer.validated_data["code"], now=timezone.now()
        )
        identity = Identity(digest=redeemed.identity, new_cookie_token=None)
        return join_response(request._request, redeemed.result, identity)
