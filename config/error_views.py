"""Django's error views, answering in the API's JSON shape under /api/ (the texts are the
edge's own: queueing/web/api_errors.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from queueing.web.api_errors import GENERIC_ERRORS


def _api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def _api_answer(status: int) -> JsonResponse:
    code, detail = GENERIC_ERRORS[status]
    return JsonResponse({"error": code, "detail": detail}, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return _api_answer(400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return _api_answer(403)
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return _api_answer(404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _api(request):
        return _api_answer(500)
    return defaults.server_error(request)
