"""Liveness and readiness probes.

Readiness tells degraded from down. PostgreSQL holds the truth: without it nothing can be
acknowledged, so the process is not ready (503). Without the hot-index Redis the room still
serves joins, status and admission from PostgreSQL (positions cost more), so the process is
ready but degraded (200, naming what): a load balancer that took every process out of rotation
for a Redis outage would turn it into a full outage.

Liveness asks nothing of anyone: it answers with the release the process runs (read once at
start-up), so a roll-out can be watched process by process at no cost."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.version import VERSION
from queueing.hot.client import HotIndexUnavailable, ping

# The same bytes for every probe: the version does not change while the process lives.
HEALTHZ_BODY = json.dumps({"status": "ok", "version": VERSION}).encode()


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
    return HttpResponse(HEALTHZ_BODY, content_type="application/json")


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
