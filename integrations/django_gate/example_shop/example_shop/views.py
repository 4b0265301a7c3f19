"""The shop's pages. Those behind the gate read the fan's pass from the request."""

import waitingroom_gate
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from waitingroom_gate import WaitingRoomPass


def _pass_summary(request: HttpRequest) -> dict[str, str] | str | None:
    if getattr(request, "waiting_room_unchecked", False):
        return "unchecked"  # the room could not be reached, and the gate fails open
    admitted: WaitingRoomPass | None = getattr(request, "waiting_room_pass", None)
    if admitted is None:
        return None
    return {
        "event": admitted.event,
        "ticket_id": admitted.ticket_id,
        "tier": admitted.tier,
        "expires_at": admitted.expires_at.isoformat(),
    }


@require_GET
def product(request: HttpRequest, product_id: int) -> JsonResponse:
    return JsonResponse({"product": product_id, "pass": _pass_summary(request)})


@csrf_exempt  # an example JSON endpoint; a real shop keeps its CSRF protection
@require_POST
def cart(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"added": True, "pass": _pass_summary(request)})


def static_file(request: HttpRequest, name: str) -> HttpResponse:
    return HttpResponse(f"/* {name} */", content_type="text/css")


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


def gate_stats(request: HttpRequest) -> JsonResponse:
    """The gate's counters in this process (exempt under /healthz: operators read it)."""
    return JsonResponse(waitingroom_gate.stats())


@csrf_exempt
@require_POST
def payment_webhook(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"received": True})
