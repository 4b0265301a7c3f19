"""The fans' endpoints (API.md, "Fans"): parse, call one service, shape the answer.

Plain Django views rather than DRF: these are the hot paths and need none of DRF's machinery.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from config.api_errors import ApiError, error_response
from events.models import Event
from queueing.identity import identity_from_request, identity_remember
from queueing.layout import event_layout
from queueing.selectors import active_count, line_size
from queueing.services import TicketView, entry_join, entry_leave, ticket_status
from queueing.tickets import InvalidTicket, TicketRef, ticket_read

_SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]{1,64}$")

View = Callable[..., HttpResponse]


def json_api(*methods: str) -> Callable[[View], View]:
    """Allow only ``methods`` and render ApiError as ``{"error", "detail"}``."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = error_response(
                    ApiError(405, "method_not_allowed", f"Use {' or '.join(methods)}.")
                )
                response["Allow"] = ", ".join(methods)
                return response
            try:
                return view(request, *args, **kwargs)
            except ApiError as error:
                return error_response(error)

        return csrf_exempt(wrapper)

    return decorate


def _event_or_404(slug: str) -> Event:
    event = Event.objects.filter(slug=slug).first() if _SLUG_RE.match(slug) else None
    if event is None:
        raise ApiError(404, "event_not_found", "No on-sale with that name.")
    return event


def _ticket_ref(ticket: str) -> TicketRef:
    try:
        return ticket_read(ticket)
    except InvalidTicket as exc:
        raise ApiError(400, "invalid_ticket", "This ticket is not valid.") from exc


def _json_body(request: HttpRequest) -> dict[str, Any]:
    try:
        raw = request.body
    except RequestDataTooBig as exc:
        raise ApiError(400, "bad_request", "The request body is too large.") from exc
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_request", "The request body is not valid JSON.") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "bad_request", "The request body must be a JSON object.")
    return body


def _optional_str(body: dict[str, Any], name: str, *, max_length: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, "bad_request", f"{name} must be a string.")
    if len(value) > max_length or "\x00" in value:
        raise ApiError(400, "bad_request", f"{name} is too long or has invalid characters.")
    return value


def _ticket_payload(view: TicketView) -> dict[str, Any]:
    return {
        "ticket": view.ticket,
        "event": view.event_slug,
        "status": view.status.value,
        "position": view.position,
        "eta": None,
        "queue_length": view.queue_length,
    }


def _ticket_response(payload: dict[str, Any], view: TicketView, *, status: int) -> JsonResponse:
    response = JsonResponse(payload, status=status)
    response["X-Poll-After-Seconds"] = f"{view.poll_after_seconds:g}"
    response["Cache-Control"] = "no-store"
    return response


@json_api("POST")
def join(request: HttpRequest, slug: str) -> HttpResponse:
    event = _event_or_404(slug)
    body = _json_body(request)
    access_code = _optional_str(body, "access_code", max_length=64)
    identity = identity_from_request(request)
    result = entry_join(
        event=event, identity=identity.digest, access_code=access_code, now=timezone.now()
    )
    response = _ticket_response(
        _ticket_payload(result.view), result.view, status=201 if result.created else 200
    )
    identity_remember(response, identity)
    return response


@json_api("GET", "DELETE")
def ticket(request: HttpRequest, ticket: str) -> HttpResponse:
    ref = _ticket_ref(ticket)
    now = timezone.now()
    if request.method == "DELETE":
        entry_leave(ref=ref, now=now)
        return HttpResponse(status=204)
    view = ticket_status(ref=ref, ticket=ticket, now=now)
    payload = {
        **_ticket_payload(view),
        "pass": None,
        "pass_expires_at": None,
        "redirect_url": None,
    }
    return _ticket_response(payload, view, status=200)


@json_api("GET")
def event_detail(request: HttpRequest, slug: str) -> HttpResponse:
    event = _event_or_404(slug)
    now = timezone.now()
    layout = event_layout(event.id)
    queue_length = line_size(layout).queue_length if layout else 0
    return JsonResponse(
        {
            "slug": event.slug,
            "name": event.name,
            "state": event.state_at(now).value,
            "queue_length": queue_length,
            "active": active_count(event.id),
            "capacity": event.capacity,
            "rate_per_minute": event.rate_per_minute,
            "eta_new": None,
            "starts_at": event.starts_at.isoformat() if event.starts_at else None,
            "ends_at": event.ends_at.isoformat() if event.ends_at else None,
        }
    )
