"""``sold-out`` over HTTP (docs/api.md, "Sold out"): the shop's call, with the on-sale's
integration key as ``passes/complete`` takes it, and staff's, with their permission to
change the on-sale as for a close. Both call staff/sell_out.py and nothing else."""

from __future__ import annotations

import hmac
from typing import Any, ClassVar

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from events.models import MESSAGE_MAX_LENGTH
from queueing.line.reads import event_by_slug
from queueing.rules.errors import NotAuthorized
from queueing.web.api_errors import errors, json_api, json_body, optional_str
from queueing.web.api_fan import event_public_payload
from queueing.web.callers import bearer_key
from staff.api import EventOutputSerializer, EventPermissions, event_output, may_see_integration_key
from staff.sell_out import event_sell_out

SHOP_ACTOR = "shop"


@json_api("POST")
def shop_sold_out(request: HttpRequest, slug: str) -> HttpResponse:
    """``POST /api/v1/events/{slug}/sold-out``: the on-sale as the public API shows it."""
    key = bearer_key(request)
    event = event_by_slug(slug)
    if not hmac.compare_digest(key.encode(), event.integration_key.encode()):
        raise NotAuthorized()
    # Read only once the key is good: a caller without it learns nothing of what it checks.
    message = optional_str(json_body(request), "message", max_length=MESSAGE_MAX_LENGTH)
    now = timezone.now()
    event = event_sell_out(event=event, message=message, actor=SHOP_ACTOR, now=now)
    return JsonResponse(event_public_payload(event, now=now))


class SoldOutInputSerializer(serializers.Serializer):
    message = serializers.CharField(
        max_length=MESSAGE_MAX_LENGTH, allow_blank=True, allow_null=True, required=False
    )


class EventSoldOutApi(APIView):
    """``POST /api/v1/manage/events/{slug}/sold-out``: the on-sale as staff see it."""

    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]

    @extend_schema(
        operation_id="manage_event_sold_out",
        request=SoldOutInputSerializer,
        responses={200: EventOutputSerializer, **errors(400, 401, 403, 404, 409)},
    )
    def post(self, request: Request, slug: str) -> Response:
        event = event_by_slug(slug)
        serializer = SoldOutInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data: dict[str, Any] = dict(serializer.validated_data)
        event = event_sell_out(
            event=event,
            message=data.get("message"),
            actor=f"staff:{request.user.get_username()}",
            now=timezone.now(),
        )
        return Response(event_output(event, with_key=may_see_integration_key(request.user)))
