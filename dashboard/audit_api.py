"""The auditors' API (docs/api.md, "Auditors"): read-only, for staff and the auditors group."""

from __future__ import annotations

import csv
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from dashboard.permissions import IsStaffOrAuditorReadOnly
from dashboard.reports import event_report
from events.models import Event
from events.validation import SLUG_RE
from queueing.line.archives import archive_described
from queueing.line.reads import event_by_slug
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.records.archive_rows import audit_row
from queueing.records.audit import canonical_json
from queueing.records.audit_verify import EventVerdict, audit_event_verify
from queueing.rules.ticket_codec import InvalidTicket, ticket_read
from queueing.web.api_errors import ApiError, errors
from staff.event_list import CheckedCursor
from staff.models import TokenScope

# The last four were added so that an outsider can recompute each hash (docs/api.md, "The
# canonical form"; "Lanes"); they come after the earlier columns, which keep their places.
CSV_COLUMNS = [
    "id",
    "at",
    "event",
    "ticket_id",
    "action",
    "actor",
    "data",
    "hash",
    "prev_hash",
    "event_id",
    "seq",
    "at_hashed",
    "lane",
]


class CSVRenderer(BaseRenderer):
    """Lets content negotiation pick CSV; the view streams the rows itself."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return b"" if data is None else str(data).encode()


class RecordCursor(CheckedCursor):
    ordering = "id"
    page_size = 100
    max_page_size = 1000

    def position_ok(self, position: str) -> bool:
        # A record id: a bigint, 19 digits at most.
        return position.isascii() and position.isdigit() and len(position) <= 18


def _parse_time(name: str, raw: str | None) -> datetime | None:
    if raw is None:
        return None
    problem = {name: ["Use an ISO 8601 time, e.g. 2026-11-21T18:00:00Z."]}
    try:
        value = parse_datetime(raw)
        if value is None:
            raise ValidationError(problem)
        # In UTC: PostgreSQL refuses offsets beyond ±15:59 that Python accepts.
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise ValidationError(problem) from exc


def _ticket_id(raw: str) -> uuid.UUID:
    """The ticket's public id, given either itself or the fan's signed ticket."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        pass
    try:
        ref = ticket_read(raw)
    except InvalidTicket as exc:
        raise ValidationError({"ticket": ["Give a ticket id (UUID) or a signed ticket."]}) from exc
    public_id = QueueEntry.objects.filter(pk=ref.entry_id).values_list("public_id", flat=True)
    found = public_id.first()
    if found is None:
        raise ValidationError({"ticket": ["No such ticket."]})
    return found


def not_archived(event: Event) -> Event:
    """``event``, unless its trail left the database for an archive: then 410 with what the
    room keeps of that file (its digest, counts and last heads), never an empty answer."""
    described = archive_described(event)
    if described is None:
        return event
    root = described["heads"].get("root", {})
    raise ApiError(
        410,
        "event_archived",
        f"{event.slug} was archived at {described['archived_at']}: its {described['records']}"
        f" audit records and {described['entries']} entries are in an archive file whose"
        f" SHA-256 is {described['sha256']} (its root chain ending at seq {root.get('seq')},"
        f" hash {root.get('hash')}), and no longer in the room. Check the file with"
        " scripts/verify_trail.py (docs/archive-format.md).",
        extra={"archive": described},
    )


def _filtered_records(params: Any) -> QuerySet[AuditRecord]:
    records = AuditRecord.objects.all()
    if slug := params.get("event"):
        if not SLUG_RE.match(slug):
            raise ValidationError({"event": ["No on-sale with that slug."]})
        event = Event.objects.filter(slug=slug).first()
        if event is None:
            raise ValidationError({"event": ["No on-sale with that slug."]})
        records = records.filter(event_id=not_archived(event).id)
    if ticket := params.get("ticket"):
        records = records.filter(ticket_id=_ticket_id(ticket[:300]))
    if action := params.get("action"):
        if action not in AuditAction.values:
            raise ValidationError({"action": [f"One of: {', '.join(AuditAction.values)}."]})
        records = records.filter(action=action)
    if since := _parse_time("since", params.get("since")):
        records = records.filter(at__gte=since)
    if until := _parse_time("until", params.get("until")):
        records = records.filter(at__lt=until)
    return records


def _row(record: AuditRecord, slugs: dict[int, str]) -> dict[str, Any]:
    return audit_row(
        id=record.id,
        at=record.at,
        slug=slugs.get(record.event_id),
        event_id=record.event_id,
        lane=record.lane,
        seq=record.seq,
        ticket_id=record.ticket_id,
        action=record.action,
        actor=record.actor,
        data=record.data,
        prev_hash=record.prev_hash,
        hash=record.hash,
    )


class RecordSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    event = serializers.CharField(allow_null=True)
    ticket_id = serializers.UUIDField(allow_null=True)
    action = serializers.ChoiceField(choices=AuditAction.values)
    actor = serializers.CharField()
    data = serializers.DictField()
    hash = serializers.CharField()
    prev_hash = serializers.CharField()
    event_id = serializers.IntegerField(help_text="The on-sale's id: `event` in the hashed form.")
    seq = serializers.IntegerField(help_text="The record's place in its chain, from 1, gapless.")
    at_hashed = serializers.CharField(
        help_text="`at` exactly as hashed: UTC, six digits of microseconds, `+00:00`."
    )
    lane = serializers.IntegerField(
        allow_null=True, help_text="The record's lane (its chain), null for the root chain."
    )


class RecordPageSerializer(serializers.Serializer):
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = RecordSerializer(many=True)


class LaneVerdictSerializer(serializers.Serializer):
    lane = serializers.IntegerField()
    ok = serializers.BooleanField()
    records = serializers.IntegerField()
    head_seq = serializers.IntegerField()
    first_bad_id = serializers.IntegerField(allow_null=True)


class VerdictSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    records = serializers.IntegerField()
    first_bad_id = serializers.IntegerField(allow_null=True)
    # Only for an on-sale with lanes (docs/api.md, "Lanes").
    problem = serializers.CharField(required=False)
    roots = serializers.IntegerField(required=False)
    lanes = LaneVerdictSerializer(many=True, required=False)


def verdict_answer(verdict: EventVerdict) -> dict[str, Any]:
    """The verify answer: without lanes, the one chain's verdict as it always was; with
    lanes, what failed in words, the root records checked and each lane's part."""
    answer: dict[str, Any] = {
        "ok": verdict.ok,
        "records": verdict.records,
        "first_bad_id": verdict.first_bad_id,
    }
    if verdict.lanes:
        answer["problem"] = verdict.problem
        answer["roots"] = verdict.roots_checked
        answer["lanes"] = [
            {
                "lane": lane,
                "ok": part.ok,
                "records": part.records,
                "head_seq": part.head_seq,
                "first_bad_id": part.first_bad_id,
            }
            for lane, part in sorted(verdict.lanes.items())
        ]
    return answer


_RECORD_FILTERS = [
    OpenApiParameter("event", str, description="On-sale slug."),
    OpenApiParameter("ticket", str, description="Ticket id (UUID) or the signed ticket."),
    OpenApiParameter("action", str, enum=AuditAction.values),
    OpenApiParameter("since", OpenApiTypes.DATETIME),
    OpenApiParameter("until", OpenApiTypes.DATETIME),
    OpenApiParameter("page_size", {"type": "integer", "minimum": 1, "maximum": 1000}),
    OpenApiParameter("cursor", str, description="From `next` or `previous`."),
    OpenApiParameter("format", str, enum=["json", "csv"]),
]


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_stream(records: QuerySet[AuditRecord], slugs: dict[int, str]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for record in records.order_by("id").iterator(chunk_size=2000):
        row = _row(record, slugs)
        row["data"] = canonical_json(row["data"])
        # As JSON, like data (docs/api.md, "Lanes"); empty for none.
        row["lane"] = "" if row["lane"] is None else canonical_json(row["lane"])
        yield writer.writerow([row[column] for column in CSV_COLUMNS])


class AuditApiView(APIView):
    """Every view of the auditors' API: staff or auditors, reading; a token needs the
    ``audit`` scope (staff/api_tokens.py), whatever the method."""

    permission_classes = [IsStaffOrAuditorReadOnly]
    required_scope = TokenScope.AUDIT


class AuditRecordsApi(AuditApiView):
    renderer_classes = [JSONRenderer, CSVRenderer]

    @extend_schema(
        parameters=_RECORD_FILTERS,
        responses={
            (200, "application/json"): RecordPageSerializer,
            (200, "text/csv"): OpenApiTypes.STR,
            **errors(400, 401, 403, 410),
        },
    )
    def get(self, request: Request) -> Response | StreamingHttpResponse:
        records = _filtered_records(request.query_params)
        slugs = dict(Event.objects.values_list("id", "slug"))
        if request.accepted_renderer.format == "csv":
            response = StreamingHttpResponse(
                _csv_stream(records, slugs), content_type="text/csv; charset=utf-8"
            )
            response["Content-Disposition"] = 'attachment; filename="audit.csv"'
            return response
        paginator = RecordCursor()
        page = paginator.paginate_queryset(records, request, view=self)
        return paginator.get_paginated_response([_row(r, slugs) for r in page or []])


class AuditVerifyApi(AuditApiView):
    @extend_schema(responses={200: VerdictSerializer, **errors(401, 403, 404, 410)})
    def get(self, request: Request, slug: str) -> Response:
        event = not_archived(event_by_slug(slug))
        return Response(verdict_answer(audit_event_verify(event_id=event.id)))


class AuditReportApi(AuditApiView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, **errors(401, 403, 404, 410)})
    def get(self, request: Request, slug: str) -> Response:
        return Response(event_report(not_archived(event_by_slug(slug))))
