"""Liveness and readiness probes."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from queueing.hot import health
from queueing.hot.client import HotIndexUnavailable


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


def readyz(request: HttpRequest) -> HttpResponse:
    problems = []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        problems.append("postgresql unreachable")
    try:
        health.ping()
    except HotIndexUnavailable:
        problems.append("redis unreachable")
    if problems:
        response = JsonResponse({"error": "not_ready", "detail": "; ".join(problems)}, status=503)
        response["Retry-After"] = str(settings.WR_UNAVAILABLE_RETRY_AFTER)
        return response
    return HttpResponse("ok", content_type="text/plain")
