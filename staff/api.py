"""Staff API for on-sales (docs/api.md, "Staff API"): one view per operation.

Over 350 lines on purpose: the on-sale's input and output serializers and the views that use
them are one resource, read together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from events.models import (
    BRANDING_TEXT_MAX_LENGTH,
    MESSAGE_MAX_LENGTH,
    RETURN_HOSTS_MAX,
    Event,
    EventMode,
    QueueOrder,
    Tier,
)
from events.validation import (
    ACCESS_CODE_MAX_LENGTH,
    LANES_MAX,
    LANES_MIN,
    return_host_normalise,
)
from queueing.line.reads import event_by_slug
from queueing.rules.branding import accent_is_low_contrast
from queueing.web.api_errors import errors
from queueing.web.branding import logo_url
from staff import services
from staff.event_list import LIST_PARAMETERS, EventCursor, events_listed
from staff.services import EDITABLE_FIELDS, TierSpec

VIEW_EVENT = "events.view_event"
ADD_EVENT = "events.add_event"
CHANGE_EVENT = "events.change_event"
MANAGE_INTEGRATION_KEY = "events.manage_integration_key"


def may_view(user: Any) -> bool:
    # As in Django's admin, the right to change an on-sale includes the right to see it.
    return bool(user.has_perm(VIEW_EVENT) or user.has_perm(CHANGE_EVENT))


def may_see_integration_key(user: Any) -> bool:
    return bool(user.has_perm(MANAGE_INTEGRATION_KEY))


def _has(user: Any, permission: str) -> bool:
    return may_view(user) if permission == VIEW_EVENT else bool(user.has_perm(permission))


class EventPermissions(BasePermission):
    """Staff is not enough: each method needs its model permissions (docs/api.md, "Staff
    API"). A view names them per method in ``needs``; otherwise reads need the right to view
    and writes the right to change."""

    message = "You lack the permission for this."

    def has_permission(self, request: Request, view: Any) -> bool:
        default = (VIEW_EVENT,) if request.method in SAFE_METHODS else (CHANGE_EVENT,)
        for permission in getattr(view, "needs", {}).get(request.method, default):
            if not _has(request.user, permission):
                # A fresh instance per request (DRF), so the message is this request's own.
                self.message = f"You lack the permission '{permission}'."
                return False
        return True


class TierSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    priority = serializers.IntegerField(min_value=0, max_value=999, default=100)
    share = serializers.IntegerField(min_value=0, max_value=1000, default=0)
    access_codes = serializers.ListField(
        child=serializers.CharField(max_length=ACCESS_CODE_MAX_LENGTH),
        default=list,
        max_length=10_000,
    )


class EventInputSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=64)
    name = serializers.CharField(max_length=200)
    target_url = serializers.URLField(max_length=500)
    capacity = serializers.IntegerField(min_value=0, max_value=10_000_000, required=False)
    rate_per_minute = serializers.IntegerField(min_value=0, max_value=10_000_000, required=False)
    session_seconds = serializers.IntegerField(min_value=30, max_value=86_400, required=False)
    heartbeat_seconds = serializers.IntegerField(min_value=10, max_value=3_600, required=False)
    # How long an away fan's place is kept after the heartbeat window; 0 = not kept.
    away_seconds = serializers.IntegerField(min_value=0, max_value=86_400, required=False)
    # Lanes the line is split in (docs/api.md, "Lanes"); fixed once anyone is in line (409).
    lanes = serializers.IntegerField(
        min_value=LANES_MIN,
        max_value=LANES_MAX,
        required=False,
        error_messages={
            "min_value": f"An on-sale has {LANES_MIN} to {LANES_MAX} lanes.",
            "max_value": f"An on-sale has {LANES_MIN} to {LANES_MAX} lanes.",
        },
    )
    # fifo or random (docs/api.md, "Random order"); fixed once anyone is in line (400).
    queue_order = serializers.ChoiceField(choices=QueueOrder.values, required=False)
    max_queue_length = serializers.IntegerField(min_value=0, max_value=100_000_000, required=False)
    max_wait_seconds = serializers.IntegerField(min_value=0, max_value=30 * 86_400, required=False)
    prequeue_opens_at = serializers.DateTimeField(allow_null=True, required=False)
    starts_at = serializers.DateTimeField(allow_null=True, required=False)
    ends_at = serializers.DateTimeField(allow_null=True, required=False)
    shuffle_at_start = serializers.BooleanField(required=False)
    # 20 bits is about a million hashes: seconds on a laptop, longer on an old phone.
    pow_difficulty = serializers.IntegerField(min_value=0, max_value=20, required=False)
    # Live tickets one client address (IPv6: one /64) may hold; 0 = no cap.
    max_live_per_address = serializers.IntegerField(
        min_value=0, max_value=1_000_000, required=False
    )
    mode = serializers.ChoiceField(choices=EventMode.values, required=False)
    allowed_return_hosts = serializers.ListField(
        child=serializers.CharField(max_length=253), max_length=RETURN_HOSTS_MAX, required=False
    )
    reentry_seconds = serializers.IntegerField(min_value=0, max_value=86_400, required=False)
    message = serializers.CharField(
        max_length=MESSAGE_MAX_LENGTH, allow_blank=True, allow_null=True, required=False
    )
    # The on-sale's own look (docs/api.md, "Your own look"); the logo is set in the admin.
    accent_color = serializers.RegexField(
        r"^#[0-9a-fA-F]{6}$",
        max_length=7,
        allow_blank=True,
        allow_null=True,
        required=False,
        error_messages={"invalid": 'A colour like #1d4ed8 (or "" for the room\'s own).'},
    )
    intro_text = serializers.CharField(
        max_length=BRANDING_TEXT_MAX_LENGTH, allow_blank=True, allow_null=True, required=False
    )
    next_steps_text = serializers.CharField(
        max_length=BRANDING_TEXT_MAX_LENGTH, allow_blank=True, allow_null=True, required=False
    )
    # Checked and made canonical by the service (events/traffic_rules.py): its messages come
    # back under fields.traffic_rules. null is no rules.
    traffic_rules = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text='A list of rules, first match wins (docs/api.md, "Traffic rules").',
    )
    tiers = TierSerializer(many=True, required=False, allow_empty=False, max_length=100)
    # The shop's Queue-it connector settings (docs/queueit.md); null or "" clears. The model
    # checks their form (events/models.py) and that the pair is unique.
    queueit_customer_id = serializers.CharField(
        max_length=64, allow_blank=True, allow_null=True, required=False
    )
    queueit_event_id = serializers.CharField(
        max_length=64, allow_blank=True, allow_null=True, required=False
    )
    # Write-only: never in an answer (queueit_secret_key_set says whether one is set).
    queueit_secret_key = serializers.CharField(
        max_length=128, allow_blank=True, allow_null=True, required=False, trim_whitespace=False
    )

    def validate_queueit_customer_id(self, value: str | None) -> str:
        return value or ""

    def validate_queueit_event_id(self, value: str | None) -> str:
        return value or ""

    def validate_queueit_secret_key(self, value: str | None) -> str:
        return value or ""

    def validate_accent_color(self, value: str | None) -> str:
        # null or "" is the room's own colour; stored lower-case, as the page uses it.
        return (value or "").lower()

    def validate_intro_text(self, value: str | None) -> str:
        return value or ""

    def validate_next_steps_text(self, value: str | None) -> str:
        return value or ""

    def validate_allowed_return_hosts(self, value: list[str]) -> list[str]:
        hosts = [return_host_normalise(host) for host in value]
        bad = [raw for raw, host in zip(value, hosts, strict=True) if host is None]
        if bad:
            raise serializers.ValidationError(
                f"Not a host name: {bad[0]!r} (give hosts like shop.example.com, no scheme "
                "or path)."
            )
        return sorted({host for host in hosts if host})

    def validate_message(self, value: str | None) -> str:
        # null clears the message, as does "": stored as "".
        return (value or "").strip()

    def validate_tiers(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Under PATCH nested items are validated as partial too: a name is still required.
        if any("name" not in tier for tier in value):
            raise serializers.ValidationError("Every tier needs a name.")
        return value

    def validate_slug(self, value: str) -> str:
        if self.instance is not None and value != self.instance.slug:
            raise serializers.ValidationError("The slug of an on-sale cannot change.")
        if self.instance is None and Event.objects.filter(slug=value).exists():
            raise serializers.ValidationError("An on-sale with this slug exists.")
        return value


class TierOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    priority = serializers.IntegerField()
    share = serializers.IntegerField()
    is_default = serializers.BooleanField()
    access_codes = serializers.ListField(child=serializers.CharField())


class EventOutputSerializer(serializers.Serializer):
    """What event_output() returns (for the schema)."""

    slug = serializers.CharField()
    name = serializers.CharField()
    target_url = serializers.CharField()
    capacity = serializers.IntegerField()
    rate_per_minute = serializers.IntegerField()
    session_seconds = serializers.IntegerField()
    heartbeat_seconds = serializers.IntegerField()
    away_seconds = serializers.IntegerField()
    lanes = serializers.IntegerField()
    queue_order = serializers.ChoiceField(choices=QueueOrder.values)
    max_queue_length = serializers.IntegerField()
    max_wait_seconds = serializers.IntegerField()
    prequeue_opens_at = serializers.DateTimeField(allow_null=True)
    starts_at = serializers.DateTimeField(allow_null=True)
    ends_at = serializers.DateTimeField(allow_null=True)
    shuffle_at_start = serializers.BooleanField()
    pow_difficulty = serializers.IntegerField()
    max_live_per_address = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=EventMode.values)
    allowed_return_hosts = serializers.ListField(child=serializers.CharField())
    reentry_seconds = serializers.IntegerField()
    message = serializers.CharField(allow_null=True)
    accent_color = serializers.CharField(help_text='"#rrggbb", or "" for the room\'s own')
    intro_text = serializers.CharField()
    next_steps_text = serializers.CharField()
    logo_url = serializers.CharField(
        allow_null=True,
        help_text="the logo's path on the room (changes with the image), null without one; "
        "the logo is set in the admin",
    )
    accent_contrast_low = serializers.BooleanField(
        help_text="true when the accent has less than 4.5:1 contrast with white (a warning)"
    )
    traffic_rules = serializers.JSONField(
        help_text='the rules in their canonical form (docs/api.md, "Traffic rules")'
    )
    integration_key = serializers.CharField(
        allow_null=True, help_text="null unless you hold events.manage_integration_key"
    )
    queueit_customer_id = serializers.CharField(help_text='"" = the Queue-it surface is off')
    queueit_event_id = serializers.CharField(help_text='"" = the slug in lower case')
    queueit_event_id_effective = serializers.CharField(
        help_text="the event id Queue-it URLs name this on-sale by"
    )
    queueit_secret_key_set = serializers.BooleanField(
        help_text="whether a Queue-it secret key is set (the key itself is never shown)"
    )
    state = serializers.ChoiceField(choices=["scheduled", "prequeue", "open", "paused", "closed"])
    control = serializers.ChoiceField(choices=["running", "paused", "closed"])
    started_at = serializers.DateTimeField(allow_null=True)
    sold_out_at = serializers.DateTimeField(allow_null=True)
    sold_out_message = serializers.CharField(allow_null=True)
    shuffle_seed_sha256 = serializers.CharField()
    draw_seed_sha256 = serializers.CharField()
    tiers = TierOutputSerializer(many=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class EventPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = EventOutputSerializer(many=True)


def _tier_output(tier: Tier) -> dict[str, Any]:
    return {
        "name": tier.name,
        "priority": tier.priority,
        "share": tier.share,
        "is_default": tier.is_default,
        "access_codes": sorted(code.code for code in tier.access_codes.all()),
    }


def event_output(event: Event, *, with_key: bool) -> dict[str, Any]:
    """The on-sale as staff see it; the integration key only ``with_key``."""
    now = timezone.now()
    data: dict[str, Any] = {"slug": event.slug}
    for name in EDITABLE_FIELDS:
        value = getattr(event, name)
        data[name] = value.isoformat() if hasattr(value, "isoformat") else value
    data["message"] = event.message or None
    data["logo_url"] = logo_url(event) or None
    data["accent_contrast_low"] = accent_is_low_contrast(event.accent_color)
    data["queueit_event_id_effective"] = event.queueit_event_id_effective
    data["queueit_secret_key_set"] = bool(event.queueit_secret_key)
    data.update(
        {
            "integration_key": event.integration_key if with_key else None,
            "state": event.state_at(now).value,
            "control": event.control,
            "started_at": event.started_at.isoformat() if event.started_at else None,
            "sold_out_at": event.sold_out_at.isoformat() if event.sold_out_at else None,
            "sold_out_message": event.sold_out_message or None,
            "shuffle_seed_sha256": event.shuffle_seed_sha256,
            "draw_seed_sha256": event.draw_seed_sha256,
            "tiers": [_tier_output(t) for t in event.tiers.prefetch_related("access_codes")],
            "created_at": event.created_at.isoformat(),
            "updated_at": event.updated_at.isoformat(),
        }
    )
    return data


def _tier_specs(raw: list[dict[str, Any]] | None) -> list[TierSpec] | None:
    if raw is None:
        return None
    # Under PATCH, DRF validates nested items as partial too and skips their defaults.
    return [
        TierSpec(
            name=t["name"],
            priority=t.get("priority", 100),
            share=t.get("share", 0),
            access_codes=list(t.get("access_codes", [])),
        )
        for t in raw
    ]


def _actor(request: Request) -> str:
    return f"staff:{request.user.get_username()}"


def _output(request: Request, event: Event) -> dict[str, Any]:
    return event_output(event, with_key=may_see_integration_key(request.user))


def _validation_error(exc: DjangoValidationError) -> ValidationError:
    if hasattr(exc, "error_dict"):
        return ValidationError(exc.message_dict)
    return ValidationError({"non_field_errors": exc.messages})


class EventListCreateApi(APIView):
    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]
    needs: ClassVar[dict[str, tuple[str, ...]]] = {"POST": (ADD_EVENT,)}

    @extend_schema(
        operation_id="manage_events_list",
        parameters=LIST_PARAMETERS,
        responses={200: EventPageSerializer, **errors(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        paginator = EventCursor()
        page = paginator.paginate_queryset(events_listed(request.query_params), request, self)
        return paginator.get_paginated_response([_output(request, event) for event in page or []])

    @extend_schema(
        operation_id="manage_events_create",
        request=EventInputSerializer,
        responses={201: EventOutputSerializer, **errors(400, 401, 403)},
    )
    def post(self, request: Request) -> Response:
        serializer = EventInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        tiers = _tier_specs(data.pop("tiers", None))
        try:
            event = services.event_create(
                actor=_actor(request),
                now=timezone.now(),
                slug=data.pop("slug"),
                name=data.pop("name"),
                target_url=data.pop("target_url"),
                tiers=tiers,
                **data,
            )
        except DjangoValidationError as exc:
            raise _validation_error(exc) from exc
        except IntegrityError as exc:
            # Two creations of the same slug at once: the loser is told like any duplicate.
            raise ValidationError({"slug": ["An on-sale with this slug exists."]}) from exc
        return Response(_output(request, event), status=201)


class EventDetailApi(APIView):
    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]

    @extend_schema(
        operation_id="manage_event_read",
        responses={200: EventOutputSerializer, **errors(401, 403, 404)},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(_output(request, event_by_slug(slug)))

    @extend_schema(
        operation_id="manage_event_change",
        request=EventInputSerializer,
        responses={200: EventOutputSerializer, **errors(400, 401, 403, 404, 409)},
    )
    def patch(self, request: Request, slug: str) -> Response:
        event = event_by_slug(slug)
        serializer = EventInputSerializer(event, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data.pop("slug", None)
        tiers = _tier_specs(data.pop("tiers", None))
        try:
            event = services.event_update(
                event=event, actor=_actor(request), now=timezone.now(), changes=data, tiers=tiers
            )
        except DjangoValidationError as exc:
            raise _validation_error(exc) from exc
        return Response(_output(request, event))


class EventControlApi(APIView):
    """pause / resume / close: the service to call is given in the URL configuration."""

    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]
    service: Callable[..., Event] | None = None

    @extend_schema(request=None, responses={200: EventOutputSerializer, **errors(401, 403, 404)})
    def post(self, request: Request, slug: str) -> Response:
        assert self.service is not None
        event = self.service(event=event_by_slug(slug), actor=_actor(request), now=timezone.now())
        return Response(_output(request, event))


class EventKeyRotateApi(APIView):
    """A new integration key for the on-sale; the old one stops working at once."""

    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]
    needs: ClassVar[dict[str, tuple[str, ...]]] = {"POST": (VIEW_EVENT, MANAGE_INTEGRATION_KEY)}

    @extend_schema(
        operation_id="manage_event_rotate_key",
        request=None,
        responses={200: EventOutputSerializer, **errors(401, 403, 404)},
    )
    def post(self, request: Request, slug: str) -> Response:
        event = services.integration_key_rotate(
            event=event_by_slug(slug), actor=_actor(request), now=timezone.now()
        )
        return Response(_output(request, event))
