"""Liveness and readiness probes.

Readiness tells degraded from down. PostgreSQL holds the truth: without it nothing can be
acknowledged, so the process is not ready (503). Without the hot-index Redis the room still
serves joins, status and admission from PostgreSQL (positions cost more), so the process is
ready but degraded (200, naming what): a load balancer that took every process out of rotation
for a Redis outage would turn it into a full outage."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from queueing.hot.client import HotIndexUnavailable, ping


@dataclass(frozen=True)
class Readiness:
    down: tuple[str, ...]  # the room cannot serve: "postgresql"
    degraded: tuple[str, ...]  # the room serves, with less: "redis"


def readiness() -> Readiness:
    down: list[str] = []
    degraded: list[str] = []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        down.append("postgresql")
    try:
        ping()
    except HotIndexUnavailable:
        degraded.append("redis")
    return Readiness(down=tuple(down), degraded=tuple(degraded))


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


def readyz(request: HttpRequest) -> HttpResponse:
    state = readiness()
    if state.down:
        detail = "; ".join(f"{name} unreachable" for name in state.down + state.degraded)
        response = JsonResponse({"error": "not_ready", "detail": detail}, status=503)
        response["Retry-After"] = str(settings.WR_UNAVAILABLE_RETRY_AFTER)
        return response
    if state.degraded:
        return HttpResponse(f"degraded: {', '.join(state.degraded)}", content_type="text/plain")
    return HttpResponse("ok", content_type="text/plain")
