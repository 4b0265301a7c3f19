"""Tracing (OpenTelemetry) and error reports (Sentry), each off unless configured, set up
once per process after it forked: a gunicorn worker (config/workers.py), a Celery pool
process (config/celery.py), the scheduler (``manage.py room_scheduler``). Their exporters'
threads would not survive a fork. At the queue's root, outside its rooms, as
``in_process.py``: every process of the room calls it, and it uses none of the rooms.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) is set and
``OTEL_SDK_DISABLED`` is not: spans of Django's views, Celery's tasks (sent and run, one
trace across both), psycopg's statements and redis-py's commands, exported over OTLP/HTTP.
The lean ASGI paths (status, join, gate, and the join batches' commits) make no spans at all
(``untraced``): their instrumented calls cost even when the sampler drops the trace
(docs/operations.md, "Logs, traces and errors"). The SDK reads the
standard ``OTEL_*`` variables itself (sampler, service name, headers, timeouts:
docs/configuration.md).

Sentry is on when ``SENTRY_DSN`` is set: unhandled errors of Django, Celery and the lean
paths (their ``logger.exception`` lines), without personal data (no addresses, cookies or
users: ``send_default_pii`` off), and no performance tracing of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import sentry_sdk
from django.conf import settings
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from sentry_sdk.integrations.celery import CeleryIntegration
from sentry_sdk.integrations.django import DjangoIntegration

logger = logging.getLogger(__name__)

_done: set[str] = set()

# Around the lean paths' work (queueing/web/hot_paths.py, join_batcher.py): no spans there.
# redis-py's and psycopg's instrumentation ran on every status poll and join even when the
# sampler dropped the trace, and cost the status path a quarter of its throughput in
# bench-quick (docs/operations.md, "Logs, traces and errors"). Without tracing, nothing.
untraced: Callable[[], AbstractContextManager[object]] = (
    suppress_instrumentation if settings.WR_TRACING else nullcontext
)


def observability_setup(*, service: str) -> None:
    """Tracing and error reports for this process (``service``: web, worker, scheduler)."""
    tracing_setup(service=service)
    error_reports_setup(service=service)


def tracing_setup(*, service: str) -> None:
    """Tracing for this process, if configured; a second call does nothing. Unconfigured,
    nothing is patched: the libraries are only imported."""
    if settings.WR_TRACING and "tracing" not in _done:
        _tracing_setup(service)
        _done.add("tracing")


def error_reports_setup(*, service: str) -> None:
    """Error reports for this process, if configured; a second call does nothing."""
    if settings.SENTRY_DSN and "errors" not in _done:
        _sentry_setup(service)
        _done.add("errors")


def _tracing_setup(service: str) -> None:

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, win over these defaults.
    resource = Resource.create(
        {
            "service.name": "waitingroom",
            "service.version": settings.WR_RELEASE,
            "wr.process": service,
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    DjangoInstrumentor().instrument()
    # Both ends: the web's span around sending a task, the worker's around running it.
    CeleryInstrumentor().instrument()
    # No SQL comments: they would make every statement's text unique to psycopg's cache.
    PsycopgInstrumentor().instrument(enable_commenter=False)
    RedisInstrumentor().instrument()
    logger.info("tracing on", extra={"wr_process": service})


def _sentry_setup(service: str) -> None:

    sentry_sdk.init(
        dsn=settings.SENTRY_DSN,
        environment=settings.SENTRY_ENVIRONMENT,
        release=settings.WR_RELEASE,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,
        # Tracing is OpenTelemetry's (above); Sentry only hears of errors.
        traces_sample_rate=None,
        server_name=service,
    )
    logger.info("error reports on", extra={"wr_process": service})
