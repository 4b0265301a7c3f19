"""Tracing and error reports with the real processes, sent to local stand-ins for an
OpenTelemetry collector and Sentry (tests/telemetry.py)."""

from __future__ import annotations

import pytest

from config.celery import app as celery_app
from tests.http import request
from tests.processes import celery_queue, running_stack, wait_until
from tests.telemetry import telemetry_sink

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

DJANGO = "opentelemetry.instrumentation.django"
CELERY = "opentelemetry.instrumentation.celery"
PSYCOPG = "opentelemetry.instrumentation.psycopg"
REDIS = "opentelemetry.instrumentation.redis"
# Celery warns of running as root (this machine's tests do; the image's user does not).
QUIET_ROOT = "ignore:You're running the worker with superuser privileges"


def test_a_join_and_its_admission_are_traced_to_a_collector(make_event) -> None:
    event = make_event(capacity=5, rate_per_minute=0)
    with (
        telemetry_sink() as (sink, received),
        running_stack(
            OTEL_EXPORTER_OTLP_ENDPOINT=sink,
            OTEL_BSP_SCHEDULE_DELAY="200",
            PYTHONWARNINGS=QUIET_ROOT,
        ) as stack,
    ):
        base = stack.web()
        # A session cookie sends the join through Django's view (the lean path leaves a
        # logged-in fan to Django); one without goes the lean way.
        through_django = request(
            "POST", f"{base}/api/v1/events/{event.slug}/join", {}, {"Cookie": "sessionid=none"}
        )
        lean = request("POST", f"{base}/api/v1/events/{event.slug}/join", {})
        assert through_django.status == lean.status == 201
        stack.worker()
        stack.beat()

        def traced() -> bool:
            with received.lock:
                spans = list(received.spans)
            traces: dict[str, set[str]] = {}
            for span in spans:
                traces.setdefault(span.trace_id, set()).add(span.scope)
            join = any({DJANGO, PSYCOPG, REDIS} <= scopes for scopes in traces.values())
            tick = any(
                {CELERY, PSYCOPG, REDIS} <= scopes
                and any(
                    s.name.startswith("run/queueing.tasks.event_tick")
                    for s in spans
                    if s.trace_id == trace_id
                )
                for trace_id, scopes in traces.items()
            )
            # The scheduler's sending of the room tick, the worker's running of it, and the
            # event tick the worker sends: one trace. Waited for too: the first event tick
            # traced may be one a join asked for, and a room tick's spans are exported by
            # the batch that follows its end.
            room_ticks = {s.trace_id for s in spans if s.name == "run/queueing.tasks.room_tick"}
            event_ticks = {s.trace_id for s in spans if s.name == "run/queueing.tasks.event_tick"}
            return join and tick and bool(room_ticks & event_ticks)

        wait_until(traced, timeout=30, what="the join's and the admission's traces")
        with received.lock:
            spans = list(received.spans)
        assert {s.service for s in spans} >= {"web", "worker", "scheduler"}
        # The lean join made no spans (queueing/observability.py, ``untraced``): of the two
        # entries the web process inserted, only the one Django's view made is in a trace.
        inserts = [
            s
            for s in spans
            if s.service == "web"
            and str(s.attributes.get("db.statement", "")).startswith(
                'INSERT INTO "queueing_queueentry"'
            )
        ]
        assert len(inserts) == 1, [s.attributes.get("db.statement") for s in inserts]


def test_an_unhandled_error_reaches_the_error_reports(make_event) -> None:
    with (
        telemetry_sink() as (sink, received),
        running_stack(
            SENTRY_DSN=f"{sink.replace('http://', 'http://0123456789abcdef@')}/42",
            PYTHONWARNINGS=QUIET_ROOT,
        ) as stack,
    ):
        stack.worker()
        # A task that fails: an event id that is not one.
        celery_app.send_task(
            "queueing.tasks.hot_index_rebuild", args=("not-an-id",), queue=celery_queue()
        )

        def reported() -> list[dict]:
            with received.lock:
                return list(received.events)

        events = wait_until(reported, timeout=30, what=f"the error's report {received.paths}")
        exception = events[0]["exception"]["values"][-1]
        assert exception["type"] == "ValueError", exception
        assert events[0]["server_name"] == "worker"
        assert "user" not in events[0] or "ip_address" not in events[0]["user"]
