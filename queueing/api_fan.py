"""The fans' endpoints (API.md, "Fans"): parse, call one service, shape the answer.

Plain Django views rather than DRF: these are the hot paths and need none of DRF's machinery.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from config.api_errors import ApiError
from config.metrics import JOIN_SECONDS, STATUS_SECONDS, observed
from events.selectors import event_by_slug
from queueing.abuse import join_rate_check
from queueing.http import json_api, json_body, optional_str
from queueing.identity import identity_from_request, identity_remember
from queueing.joining import entry_join
from queueing.pow import pow_challenge, pow_check
from queueing.selectors import event_public_view
from queueing.services import TicketView, entry_leave, ticket_status
from queueing.tickets import InvalidTicket, TicketRef, ticket_read


def _ticket_ref(ticket: str) -> TicketRef:
    try:
        return ticket_read(ticket)
    except InvalidTicket as exc:
        raise ApiError(400, "invalid_ticket", "This ticket is not valid.") from exc


def _ticket_payload(view: TicketView) -> dict[str, Any]:
    return {
        "ticket": view.ticket,
        "event": view.event_slug,
        "status": view.status.value,
        "position": view.position,
        "eta": view.eta.as_dict() if view.eta else None,
        "queue_length": view.queue_length,
    }


def _ticket_response(payload: dict[str, Any], view: TicketView, *, status: int) -> JsonResponse:
    response = JsonResponse(payload, status=status)
    response["X-Poll-After-Seconds"] = f"{view.poll_after_seconds:g}"
    response["Cache-Control"] = "no-store"
    return response


@observed(JOIN_SECONDS)
@json_api("POST")
def join(request: HttpRequest, slug: str) -> HttpResponse:
    event = event_by_slug(slug)
    body = json_body(request)
    access_code = optional_str(body, "access_code", max_length=64)
    identity = identity_from_request(request)
    join_rate_check(request=request, identity=identity.digest)
    pow_check(event=event, proof=body.get("pow"))
    result = entry_join(
        event=event, identity=identity.digest, access_code=access_code, now=timezone.now()
    )
    response = _ticket_response(
        _ticket_payload(result.view), result.view, status=201 if result.created else 200
    )
    identity_remember(response, identity)
    return response


@observed(STATUS_SECONDS)
@json_api("GET", "DELETE")
def ticket(request: HttpRequest, ticket: str) -> HttpResponse:
    ref = _ticket_ref(ticket)
    now = timezone.now()
    if request.method == "DELETE":
        entry_leave(ref=ref, now=now)
        return HttpResponse(status=204)
    view = ticket_status(ref=ref, ticket=ticket, now=now)
    issued = view.issued_pass
    payload = {
        **_ticket_payload(view),
        "pass": issued.token if issued else None,
        "pass_expires_at": issued.expires_at.isoformat() if issued else None,
        "redirect_url": issued.redirect_url if issued else None,
    }
    return _ticket_response(payload, view, status=200)


@json_api("GET")
def challenge(request: HttpRequest, slug: str) -> HttpResponse:
    event = event_by_slug(slug)
    issued = pow_challenge(event)
    response = JsonResponse(
        {
            "challenge": issued.challenge,
            "difficulty": issued.difficulty,
            "expires_in": issued.expires_in,
            "algorithm": 'sha256(challenge + ":" + nonce) starts with `difficulty` zero bits',
        }
    )
    response["Cache-Control"] = "no-store"
    return response


@json_api("GET")
def event_detail(request: HttpRequest, slug: str) -> HttpResponse:
    event = event_by_slug(slug)
    now = timezone.now()
    view = event_public_view(event, now=now)
    return JsonResponse(
        {
            "slug": event.slug,
            "name": event.name,
            "state": view.state.value,
            "queue_length": view.queue_length,
            "active": view.active,
            "capacity": event.capacity,
            "rate_per_minute": event.rate_per_minute,
            "eta_new": view.eta_new.as_dict() if view.eta_new else None,
            "prequeue_opens_at": _iso(event.prequeue_opens_at),
            "starts_at": _iso(event.starts_at),
            "ends_at": _iso(event.ends_at),
            "started_at": _iso(event.started_at),
            # The shuffle's commitment, then its reveal (see queueing/shuffle.py).
            "shuffle_seed_sha256": event.shuffle_seed_sha256,
            "shuffle_seed": event.shuffle_seed if event.started_at else None,
        }
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
