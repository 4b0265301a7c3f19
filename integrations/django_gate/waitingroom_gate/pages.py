"""The two answers the gate gives itself instead of the shop's view: a request the traffic
rules block (403), and the busy page while the room cannot be reached (503).

GET and HEAD get a short HTML page: the shop's own template ``waitingroom_gate/blocked.html``
or ``waitingroom_gate/busy.html`` when it has one (its look, its languages), else a plain
one. Other methods get JSON ``{"error", "detail"}``, as scripts expect."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import TemplateDoesNotExist
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers
from django.utils.html import escape

SAFE_METHODS = frozenset({"GET", "HEAD"})

_PLAIN_PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width, initial-scale=1">'
    "<title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
)


def _page(request: HttpRequest, template: str, title: str, text: str, status: int) -> HttpResponse:
    try:
        body = render_to_string(template, {"status": status}, request=request)
    except TemplateDoesNotExist:  # also what a project without TEMPLATES raises
        body = _PLAIN_PAGE.format(title=escape(title), text=escape(text))
    return HttpResponse(body, status=status, content_type="text/html; charset=utf-8")


def blocked_response(request: HttpRequest) -> HttpResponse:
    detail = "This request is blocked by the site's traffic rules."
    response: HttpResponse
    if request.method in SAFE_METHODS:
        response = _page(request, "waitingroom_gate/blocked.html", "Blocked", detail, 403)
    else:
        response = JsonResponse({"error": "traffic_blocked", "detail": detail}, status=403)
    add_never_cache_headers(response)
    return response


def busy_response(request: HttpRequest, retry_after: int) -> HttpResponse:
    detail = "The site is busy and cannot let anyone in right now. Please try again shortly."
    response: HttpResponse
    if request.method in SAFE_METHODS:
        response = _page(request, "waitingroom_gate/busy.html", "Busy", detail, 503)
    else:
        response = JsonResponse({"error": "unavailable", "detail": detail}, status=503)
    response["Retry-After"] = str(retry_after)
    add_never_cache_headers(response)
    return response
