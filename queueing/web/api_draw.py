"""A draw, for anyone to check (docs/api.md, "The draw"): its commitment and result, the frozen
list page by page, and one registration's inclusion proof. No login: what is published holds
no address and no identity."""

from __future__ import annotations

import re
import uuid
from typing import ClassVar

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from queueing.line.draw import (
    draw_listed_page,
    draw_tiers,
    draw_window,
    registration_inclusion,
)
from queueing.line.reads import event_by_slug
from queueing.models import Registration
from queueing.rules.errors import EventNotOpen, InvalidInput, RegistrationNotFound
from queueing.web.api_errors import errors

PAGE_MAX = 1000
_HEX64 = re.compile(r"^[0-9a-f]{0,64}\Z")


class TierResultSerializer(serializers.Serializer):
    registrations = serializers.IntegerField()
    winners = serializers.IntegerField()
    waitlist = serializers.IntegerField()


class DrawSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["registering", "drawn"])
    opens_at = serializers.DateTimeField()
    closes_at = serializers.DateTimeField()
    winners = serializers.IntegerField(help_text="per tier")
    waitlist = serializers.IntegerField(help_text="per tier")
    draw_seed_sha256 = serializers.CharField(help_text="published from the on-sale's creation")
    draw_seed = serializers.CharField(allow_null=True, help_text="null until the draw")
    list_root = serializers.CharField(allow_null=True)
    count = serializers.IntegerField(allow_null=True)
    drawn_at = serializers.DateTimeField(allow_null=True)
    tiers = serializers.DictField(child=TierResultSerializer())


class ListedSerializer(serializers.Serializer):
    hash = serializers.CharField()
    tier = serializers.CharField()
    outcome = serializers.ChoiceField(choices=["won", "waitlisted", "lost"])
    rank = serializers.IntegerField(help_text="1-based, in the tier's draw order")


class ListedPageSerializer(serializers.Serializer):
    results = ListedSerializer(many=True)
    next = serializers.CharField(allow_null=True)


class ProofStepSerializer(serializers.Serializer):
    side = serializers.ChoiceField(choices=["left", "right"])
    hash = serializers.CharField()


class InclusionSerializer(serializers.Serializer):
    registration = serializers.UUIDField()
    hash = serializers.CharField()
    tier = serializers.CharField()
    outcome = serializers.ChoiceField(choices=["won", "waitlisted", "lost"])
    rank = serializers.IntegerField()
    list_root = serializers.CharField()
    count = serializers.IntegerField()
    proof = ProofStepSerializer(many=True)


class _Public(APIView):
    authentication_classes: ClassVar[list[type]] = []
    permission_classes: ClassVar[list[type[BasePermission]]] = [AllowAny]


class DrawApi(_Public):
    """``GET /api/v1/events/{slug}/draw``."""

    @extend_schema(
        operation_id="draw_read", tags=["draw"], responses={200: DrawSerializer, **errors(404)}
    )
    def get(self, request: Request, slug: str) -> Response:
        event = event_by_slug(slug)
        window = draw_window(event)
        drawn = window.drawn_at is not None
        tiers = draw_tiers(event.id) if drawn else {}
        return Response(
            {
                "state": "drawn" if drawn else "registering",
                "opens_at": window.opens_at.isoformat(),
                "closes_at": window.closes_at.isoformat(),
                "winners": window.winners,
                "waitlist": window.waitlist,
                "draw_seed_sha256": event.draw_seed_sha256,
                # Revealed with the result, never before: a seed known while fans register
                # would let anyone pick the registrations that win. The draw's own seed: the
                # shuffle's is still secret here (the line has not started).
                "draw_seed": event.draw_seed if drawn else None,
                "list_root": window.list_root if drawn else None,
                "count": window.list_count if drawn else None,
                "drawn_at": window.drawn_at.isoformat() if window.drawn_at else None,
                "tiers": tiers,
            }
        )


class DrawListApi(_Public):
    """``GET /api/v1/events/{slug}/draw/registrations?after=<hash>&limit=<n>``."""

    @extend_schema(
        operation_id="draw_list",
        tags=["draw"],
        parameters=[
            OpenApiParameter("after", OpenApiTypes.STR, description="the last hash of a page"),
            OpenApiParameter("limit", OpenApiTypes.INT, description=f"1 to {PAGE_MAX}"),
        ],
        responses={200: ListedPageSerializer, **errors(400, 404, 409)},
    )
    def get(self, request: Request, slug: str) -> Response:
        after = request.query_params.get("after", "")
        if not _HEX64.match(after):
            raise InvalidInput("after must be a hash from a page of this list.")
        raw_limit = request.query_params.get("limit", str(PAGE_MAX))
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= PAGE_MAX:
            raise InvalidInput(f"limit must be a number from 1 to {PAGE_MAX}.")
        limit = int(raw_limit)
        event = event_by_slug(slug)
        if draw_window(event).drawn_at is None:
            raise EventNotOpen("The list is published with the draw, at the window's close.")
        page = draw_listed_page(event=event, after=after, limit=limit)
        results = [
            {"hash": h, "tier": tier, "outcome": outcome, "rank": rank}
            for h, tier, outcome, rank in page
        ]
        following = None
        if len(page) == limit:
            following = request.build_absolute_uri(request.path) + (
                f"?after={page[-1][0]}&limit={limit}"
            )
        return Response({"results": results, "next": following})


class InclusionApi(_Public):
    """``GET /api/v1/registrations/{registration}/proof``."""

    @extend_schema(
        operation_id="registration_proof",
        tags=["draw"],
        responses={200: InclusionSerializer, **errors(404, 409)},
    )
    def get(self, request: Request, registration: str) -> Response:
        found = _registration(registration)
        window = draw_window(found.event)
        if window.drawn_at is None:
            raise EventNotOpen("Proofs are published with the draw, at the window's close.")
        inclusion = registration_inclusion(registration=found)
        if inclusion is None:
            raise RegistrationNotFound("This registration was not in the draw (never confirmed).")
        return Response(
            {
                "registration": str(found.id),
                "hash": found.public_hash,
                "tier": inclusion.tier,
                "outcome": found.outcome,
                "rank": found.draw_rank,
                "list_root": window.list_root,
                "count": window.list_count,
                "proof": [{"side": s.side, "hash": s.hash} for s in inclusion.proof],
            }
        )


def _registration(raw: str) -> Registration:
    try:
        registration_id = uuid.UUID(raw)
    except ValueError:
        raise RegistrationNotFound() from None
    found = Registration.objects.select_related("tier", "event").filter(id=registration_id)
    registration = found.first()
    if registration is None:
        raise RegistrationNotFound()
    return registration
