"""Staff API for webhook endpoints (docs/api.md, "Webhooks"): one view per operation, each
needing the model permission of ``queueing.WebhookEndpoint`` its method names."""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.permissions import BasePermission, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from events.models import Event
from queueing.models import WebhookDelivery, WebhookDeliveryState, WebhookEndpoint
from queueing.rules.webhooks import WEBHOOK_TYPES
from queueing.web.api_errors import ApiError, errors
from staff import webhooks
from staff.api import EventPermissions

VIEW = "queueing.view_webhookendpoint"
ADD = "queueing.add_webhookendpoint"
CHANGE = "queueing.change_webhookendpoint"
DELETE = "queueing.delete_webhookendpoint"


class EndpointInputSerializer(serializers.Serializer):
    event = serializers.SlugField(
        max_length=64, allow_null=True, required=False, help_text="an on-sale's slug; null: all"
    )
    url = serializers.URLField(max_length=500)
    types = serializers.ListField(
        child=serializers.ChoiceField(choices=list(WEBHOOK_TYPES)),
        min_length=1,
        max_length=len(WEBHOOK_TYPES),
    )
    description = serializers.CharField(max_length=200, allow_blank=True, required=False)
    enabled = serializers.BooleanField(required=False)

    def validate_event(self, value: str | None) -> Event | None:
        if value is None:
            return None
        event = Event.objects.filter(slug=value).first()
        if event is None:
            raise serializers.ValidationError("No on-sale with this slug.")
        return event


class EndpointOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    event = serializers.CharField(allow_null=True, help_text="the on-sale's slug; null: all")
    url = serializers.CharField()
    types = serializers.ListField(child=serializers.CharField())
    description = serializers.CharField()
    enabled = serializers.BooleanField()
    disabled_reason = serializers.CharField(help_text='why the room turned it off, or ""')
    failures_in_a_row = serializers.IntegerField()
    previous_secret_until = serializers.DateTimeField(
        allow_null=True, help_text="after a rotation: until when the previous secret signs too"
    )
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField()
    secret = serializers.CharField(
        required=False, help_text="only in the answers of the creation and the rotation"
    )


class AttemptOutputSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField()
    status_code = serializers.IntegerField(allow_null=True)
    response_excerpt = serializers.CharField(help_text="the answer's first 1,024 bytes")
    error = serializers.CharField(help_text='why it failed, or ""')


class DeliveryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    type = serializers.CharField()
    state = serializers.ChoiceField(choices=WebhookDeliveryState.values)
    attempts = AttemptOutputSerializer(many=True)
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    delivered_at = serializers.DateTimeField(allow_null=True)
    body = serializers.CharField(help_text="the exact JSON POSTed")


class DeliveryPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = DeliveryOutputSerializer(many=True)


def endpoint_output(endpoint: WebhookEndpoint, *, secret: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": str(endpoint.public_id),
        "event": endpoint.event.slug if endpoint.event else None,
        "url": endpoint.url,
        "types": endpoint.types,
        "description": endpoint.description,
        "enabled": endpoint.enabled,
        "disabled_reason": endpoint.disabled_reason,
        "failures_in_a_row": endpoint.failures_in_a_row,
        "previous_secret_until": _time(endpoint.previous_secret_until),
        "created_at": _time(endpoint.created_at),
        "created_by": endpoint.created_by,
    }
    if secret is not None:
        data["secret"] = secret
    return data


def _time(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def delivery_output(delivery: WebhookDelivery) -> dict[str, Any]:
    pending = delivery.state == WebhookDeliveryState.PENDING
    return {
        "id": str(delivery.public_id),
        "type": delivery.type,
        "state": delivery.state,
        "attempts": [
            {
                "number": a.number,
                "started_at": _time(a.started_at),
                "duration_ms": a.duration_ms,
                "status_code": a.status_code,
                "response_excerpt": a.response_excerpt,
                "error": a.error,
            }
            for a in delivery.tries.all()
        ],
        "next_attempt_at": _time(delivery.due_at) if pending else None,
        "created_at": _time(delivery.created_at),
        "delivered_at": _time(delivery.delivered_at),
        "body": delivery.body,
    }


def endpoint_by_id(endpoint_id: Any) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.select_related("event").filter(public_id=endpoint_id).first()
    if endpoint is None:
        raise ApiError(404, "webhook_not_found", "No webhook endpoint with this id.")
    return endpoint


def _actor(request: Request) -> str:
    return f"staff:{request.user.get_username()}"


def _refused(exc: DjangoValidationError) -> ValidationError:
    return ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)


class _Endpoints(APIView):
    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]
    needs: ClassVar[dict[str, tuple[str, ...]]] = {
        "GET": (VIEW,),
        "POST": (ADD,),
        "PATCH": (CHANGE,),
        "DELETE": (DELETE,),
    }


class EndpointListCreateApi(_Endpoints):
    @extend_schema(
        operation_id="manage_webhooks_list",
        responses={200: EndpointOutputSerializer(many=True), **errors(401, 403)},
    )
    def get(self, request: Request) -> Response:
        endpoints = WebhookEndpoint.objects.select_related("event").order_by("id")
        return Response([endpoint_output(e) for e in endpoints])

    @extend_schema(
        operation_id="manage_webhooks_create",
        request=EndpointInputSerializer,
        responses={201: EndpointOutputSerializer, **errors(400, 401, 403)},
    )
    def post(self, request: Request) -> Response:
        serializer = EndpointInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        try:
            made = webhooks.endpoint_create(actor=_actor(request), now=timezone.now(), **data)
        except DjangoValidationError as exc:
            raise _refused(exc) from exc
        return Response(endpoint_output(made.endpoint, secret=made.secret), status=201)


class EndpointDetailApi(_Endpoints):
    @extend_schema(
        operation_id="manage_webhook_read",
        responses={200: EndpointOutputSerializer, **errors(401, 403, 404)},
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        return Response(endpoint_output(endpoint_by_id(endpoint_id)))

    @extend_schema(
        operation_id="manage_webhook_change",
        request=EndpointInputSerializer,
        responses={200: EndpointOutputSerializer, **errors(400, 401, 403, 404)},
    )
    def patch(self, request: Request, endpoint_id: str) -> Response:
        endpoint = endpoint_by_id(endpoint_id)
        serializer = EndpointInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        try:
            changed = webhooks.endpoint_update(
                endpoint=endpoint, changes=dict(serializer.validated_data)
            )
        except DjangoValidationError as exc:
            raise _refused(exc) from exc
        return Response(endpoint_output(changed))

    @extend_schema(
        operation_id="manage_webhook_delete",
        responses={204: None, **errors(401, 403, 404)},
    )
    def delete(self, request: Request, endpoint_id: str) -> Response:
        webhooks.endpoint_delete(endpoint=endpoint_by_id(endpoint_id))
        return Response(status=204)


class EndpointRotateSecretApi(_Endpoints):
    needs: ClassVar[dict[str, tuple[str, ...]]] = {"POST": (CHANGE,)}

    @extend_schema(
        operation_id="manage_webhook_rotate_secret",
        request=None,
        responses={200: EndpointOutputSerializer, **errors(401, 403, 404)},
    )
    def post(self, request: Request, endpoint_id: str) -> Response:
        made = webhooks.endpoint_rotate_secret(
            endpoint=endpoint_by_id(endpoint_id), now=timezone.now()
        )
        return Response(endpoint_output(made.endpoint, secret=made.secret))


class DeliveryCursor(CursorPagination):
    ordering = "-id"
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


class EndpointDeliveriesApi(_Endpoints):
    @extend_schema(
        operation_id="manage_webhook_deliveries",
        parameters=[OpenApiParameter("cursor", str), OpenApiParameter("page_size", int)],
        responses={200: DeliveryPageSerializer, **errors(401, 403, 404)},
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        endpoint = endpoint_by_id(endpoint_id)
        deliveries = WebhookDelivery.objects.filter(endpoint=endpoint).prefetch_related("tries")
        paginator = DeliveryCursor()
        page = paginator.paginate_queryset(deliveries, request, view=self)
        return paginator.get_paginated_response([delivery_output(d) for d in page or []])
