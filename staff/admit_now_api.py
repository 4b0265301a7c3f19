"""``POST /api/v1/manage/events/{slug}/admit-now`` (docs/api.md, "Staff API"): staff let N
fans in at once, as the admin's "admit N now" and the dashboard's control do, through the same
service: past the pace, never past the capacity, each admission audited as theirs.

An on-sale that cannot let anyone in says why, as the contract's refusal (409, or 410 once
archived), rather than a 200 that admitted nobody: a script that steers a sale must be able to
tell "the line was empty" from "the on-sale is closed"."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any, ClassVar

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission, IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from events.models import Event, EventState, Tier
from queueing.line.admission import AdmissionOutcome
from queueing.line.reads import event_by_slug
from queueing.rules.errors import (
    AdmissionBusy,
    EventArchived,
    EventClosed,
    EventMaintenance,
    EventNotFound,
    EventNotOpen,
    EventSoldOut,
    QueueError,
)
from queueing.web.api_errors import errors
from staff import services
from staff.api import EventPermissions
from staff.consequences import fans_now


class AdmitNowInputSerializer(serializers.Serializer):
    count = serializers.IntegerField(
        min_value=1,
        max_value=services.ADMIT_NOW_MAX,
        help_text=f"How many fans to let in now, 1 to {services.ADMIT_NOW_MAX:,}.",
    )


class AdmitNowOutputSerializer(serializers.Serializer):
    event = serializers.CharField(help_text="The on-sale's slug.")
    asked = serializers.IntegerField()
    admitted = serializers.IntegerField(help_text="Fans let in by this call.")
    ticket_ids = serializers.ListField(
        child=serializers.UUIDField(), help_text="Their tickets' public ids, in the order let in."
    )
    by_tier = serializers.DictField(child=serializers.IntegerField(), help_text="Per tier name.")
    expired = serializers.IntegerField(
        help_text="Fans reached whose page was gone past their hold: expired, not let in."
    )
    short_because = serializers.ChoiceField(
        choices=["capacity", "line"],
        allow_null=True,
        help_text="Why fewer than asked went in: the shop is at its capacity, or nobody else "
        "in line could go in now; null when all went in.",
    )
    active = serializers.IntegerField(help_text="Fans in the shop now.")
    capacity = serializers.IntegerField(help_text="0 = no cap.")


def _refusal(event: Event, skipped: str, now: datetime) -> QueueError:
    """Why the admission run let nobody in, as the contract's error."""
    if skipped == "busy":
        return AdmissionBusy(retry_after=1)
    if skipped == "missing":
        return EventNotFound()
    if skipped == "maintenance":
        return EventMaintenance(
            f"{event.name} is in maintenance: nobody can be let in until its mode changes."
        )
    event.refresh_from_db()
    if event.state_at(now) == EventState.CLOSED:
        if event.sold_out_at is not None:
            return EventSoldOut(f"{event.name} is sold out: nobody more can be let in.")
        return EventClosed(f"{event.name} is closed: nobody more can be let in.")
    return EventNotOpen(f"{event.name} has not started: nobody can be let in before the start.")


def admit_now_answer(event: Event, asked: int, outcome: AdmissionOutcome) -> dict[str, Any]:
    tier_names = dict(Tier.objects.filter(event_id=event.pk).values_list("id", "name"))
    active = fans_now([event.pk])[event.pk].in_shop
    short_because = None
    if len(outcome.admitted) < asked:
        at_capacity = bool(event.capacity) and active >= event.capacity
        short_because = "capacity" if at_capacity else "line"
    return {
        "event": event.slug,
        "asked": asked,
        "admitted": len(outcome.admitted),
        "ticket_ids": [str(moved.public_id) for moved in outcome.admitted],
        "by_tier": dict(Counter(tier_names[moved.tier_id] for moved in outcome.admitted)),
        "expired": len(outcome.expired),
        "short_because": short_because,
        "active": active,
        "capacity": event.capacity,
    }


class EventAdmitNowApi(APIView):
    permission_classes: ClassVar[list[type[BasePermission]]] = [IsAdminUser, EventPermissions]

    @extend_schema(
        operation_id="manage_event_admit_now",
        request=AdmitNowInputSerializer,
        responses={200: AdmitNowOutputSerializer, **errors(400, 401, 403, 404, 409, 410)},
    )
    def post(self, request: Request, slug: str) -> Response:
        event = event_by_slug(slug)
        serializer = AdmitNowInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        count: int = serializer.validated_data["count"]
        if event.archived_at is not None:
            raise EventArchived()
        now = timezone.now()
        outcome = services.event_admit_now(
            event=event, count=count, actor=f"staff:{request.user.get_username()}", now=now
        )
        if outcome.skipped:
            raise _refusal(event, outcome.skipped, now)
        return Response(admit_now_answer(event, count, outcome))
