"""The protected site's endpoints (docs/api.md, "Protected sites"): JWKS, verify, complete."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from queueing.line.sessions import pass_complete, pass_verify
from queueing.passes.signing import jwks
from queueing.web.api_errors import ApiError, json_api, json_body, optional_str
from queueing.web.callers import bearer_key


@json_api("GET")
def jwks_document(request: HttpRequest) -> HttpResponse:
    response = JsonResponse(jwks(now=timezone.now()))
    # Shops may cache it briefly; a rotated key is published long before it signs.
    response["Cache-Control"] = "public, max-age=300"
    return response


def _required_pass(body: dict[str, object]) -> str:
    """Any string is a pass to judge (garbage is answered as malformed, not refused)."""
    token = body.get("pass")
    if not isinstance(token, str):
        raise ApiError(400, "bad_request", "pass is required and must be a string.")
    return token


@json_api("POST")
def verify(request: HttpRequest) -> HttpResponse:
    body = json_body(request)
    verdict = pass_verify(
        token=_required_pass(body),
        now=timezone.now(),
        event_slug=optional_str(body, "event", max_length=64),
    )
    if not verdict.valid:
        return JsonResponse({"valid": False, "reason": verdict.reason})
    return JsonResponse(
        {
            "valid": True,
            "event": verdict.event,
            "ticket_id": str(verdict.ticket_id),
            "expires_at": verdict.expires_at.isoformat() if verdict.expires_at else None,
        }
    )


@json_api("POST")
def complete(request: HttpRequest) -> HttpResponse:
    key = bearer_key(request)
    body = json_body(request)
    pass_complete(
        token=_required_pass(body),
        outcome=optional_str(body, "outcome", max_length=32) or "completed",
        integration_key=key,
        now=timezone.now(),
    )
    return HttpResponse(status=204)
