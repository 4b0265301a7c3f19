"""An on-sale's registration window over the staff API (docs/api.md, "Registration and the
draw"): read it, and set it with the right to change the on-sale."""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from queueing.line.reads import event_by_slug
from queueing.line.registration import registration_window_set
from queueing.models import RegistrationWindow
from queueing.rules.errors import EventNotFound
from queueing.web.api_errors import errors
from staff.api import EventPermissions


class WindowInputSerializer(serializers.Serializer):
    opens_at = serializers.DateTimeField()
    closes_at = serializers.DateTimeField()
    winners = serializers.IntegerField(min_value=0, max_value=10_000_000)
    waitlist = serializers.IntegerField(min_value=0, max_value=10_000_000, default=0)
    invitation_hours = serializers.IntegerField(min_value=1, max_value=24 * 30, default=48)
    # Write-only: null or "" turns the shop route off; absent keeps the key there is.
    shop_key = serializers.CharField(
        min_length=32, max_length=256, allow_blank=True, allow_null=True, required=False
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["closes_at"] <= attrs["opens_at"]:
            raise serializers.ValidationError({"closes_at": ["It must be after opens_at."]})
        return attrs


class WindowOutputSerializer(serializers.Serializer):
    opens_at = serializers.DateTimeField()
    closes_at = serializers.DateTimeField()
    winners = serializers.IntegerField(help_text="winners per tier")
    waitlist = serializers.IntegerField(help_text="waitlisted fans per tier")
    invitation_hours = serializers.IntegerField()
    shop_key_set = serializers.BooleanField(help_text="the key itself is never shown")
    registrations = serializers.IntegerField()
    confirmed = serializers.IntegerField()


def window_output(window: RegistrationWindow) -> dict[str, Any]:
    registrations = window.event.registrations
    return {
        "opens_at": window.opens_at.isoformat(),
        "closes_at": window.closes_at.isoformat(),
        "winners": window.winners,
        "waitlist": window.waitlist,
        "invitation_hours": window.invitation_hours,
        "shop_key_set": bool(window.shop_key),
        "registrations": registrations.count(),
        "confirmed": registrations.filter(status="confirmed").count(),
    }


class RegistrationWindowApi(APIView):
    """``/api/v1/manage/events/{slug}/registration``."""

    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]

    @extend_schema(
        operation_id="manage_registration_window_read",
        responses={200: WindowOutputSerializer, **errors(401, 403, 404)},
    )
    def get(self, request: Request, slug: str) -> Response:
        window = RegistrationWindow.objects.filter(event=event_by_slug(slug)).first()
        if window is None:
            raise EventNotFound("This on-sale has no registration window.")
        return Response(window_output(window))

    @extend_schema(
        operation_id="manage_registration_window_set",
        request=WindowInputSerializer,
        responses={200: WindowOutputSerializer, **errors(400, 401, 403, 404, 409)},
    )
    def put(self, request: Request, slug: str) -> Response:
        event = event_by_slug(slug)
        serializer = WindowInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        if "shop_key" in fields:
            fields["shop_key"] = fields["shop_key"] or ""
        try:
            window = registration_window_set(
                event=event,
                actor=f"staff:{request.user.get_username()}",
                now=timezone.now(),
                fields=fields,
            )
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from exc
        return Response(window_output(window))
