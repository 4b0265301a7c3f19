"""Liveness and readiness probes.

Readiness tells degraded from down. PostgreSQL holds the truth: without it nothing can be
acknowledged, so the process is not ready (503). Without the hot-index Redis the room still
serves joins, status and admission from PostgreSQL (positions cost more), so the process is
ready but degraded (200, naming what): a load balancer that took every process out of rotation
for a Redis outage would turn it into a full outage. The same holds for the Celery broker: joins
and polls go on without it, but nobody is let in on a tick, so it is named ("broker").

Liveness asks nothing of anyone: it answers with the release the process runs (read once at
start-up), so a roll-out can be watched process by process at no cost."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.celery import app as celery_app
from config.version import VERSION
from queueing.hot.client import HotIndexUnavailable, ping
from queueing.in_process import ProcessCache

# Probes come every few seconds from each balancer, and /metrics asks too: the broker's answer
# is kept this long per process rather than a connection opened for each.
BROKER_ANSWER_SECONDS = 2.0
BROKER_TIMEOUT_SECONDS = 1.0
_broker_answers: ProcessCache[str, bool] = ProcessCache(
    "broker answers", seconds=BROKER_ANSWER_SECONDS, max_entries=4
)

# The same bytes for every probe: the version does not change while the process lives.
HEALTHZ_BODY = json.dumps({"status": "ok", "version": VERSION}).encode()


@dataclass(frozen=True)
class Readiness:
    down: tuple[str, ...]  # the room cannot serve: "postgresql"
    degraded: tuple[str, ...]  # the room serves, with less: "redis", "broker"


def broker_answers() -> bool:
    """Whether the Celery broker takes a connection, within BROKER_TIMEOUT_SECONDS (kept for
    BROKER_ANSWER_SECONDS)."""
    url = settings.CELERY_BROKER_URL
    fresh, answer = _broker_answers.fresh(url)
    if fresh and answer is not None:
        return answer
    try:
        with celery_app.connection_for_write(
            url,
            connect_timeout=BROKER_TIMEOUT_SECONDS,
            transport_options={"max_retries": 0, "socket_timeout": BROKER_TIMEOUT_SECONDS},
        ) as broker:
            broker.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_SECONDS)
        answer = True
    except Exception:  # noqa: BLE001 - whatever the transport raises, the broker is not there
        answer = False
    return _broker_answers.put(url, answer)


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
    if not broker_answers():
        degraded.append("broker")
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
