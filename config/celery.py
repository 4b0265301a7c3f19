"""The Celery app; the beat schedule lives in settings (CELERY_BEAT_SCHEDULE)."""

import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import (
    beat_init,
    before_task_publish,
    celeryd_init,
    setup_logging,
    task_postrun,
    task_prerun,
    worker_process_init,
)
from django.conf import settings
from django.db import close_old_connections

from queueing.observability import error_reports_setup, observability_setup, tracing_setup
from queueing.web.request_ids import current_request_id, request_id_valid

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("waitingroom")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# The message header that carries the id of the request that sent a task.
REQUEST_ID_HEADER = "wr_request_id"


@task_prerun.connect
@task_postrun.connect
def connections_between_tasks(**_: Any) -> None:
    """Around each task, what Django does around a request: the connection goes back to the
    pool (which keeps it open: no new PostgreSQL connection per tick), or is closed if it
    broke. The fix-up no longer closes them (settings: CELERY_DB_REUSE_MAX)."""
    close_old_connections()


@setup_logging.connect
def logging_as_settings_say(loglevel: int | str | None = None, **_: Any) -> None:
    """The worker's lines as every process's (LOG_FORMAT): connected, this keeps Celery from
    putting its own format on the root logger. Its own loggers keep the level its ``-l``
    asks (tasks received and succeeded at INFO), whatever LOG_LEVEL says of the rest."""
    logging.config.dictConfig(settings.LOGGING)
    if loglevel:
        logging.getLogger("celery").setLevel(loglevel)
    # Warnings (Celery's about running as root, libraries' deprecations) as log lines too.
    logging.captureWarnings(True)


@before_task_publish.connect
def request_id_sent(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """A task sent while handling a request (or another task) carries that request's id."""
    request_id = current_request_id.get()
    if request_id is not None and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


@task_prerun.connect
def request_id_received(task: Any = None, **_: Any) -> None:
    request_id = request_id_valid(getattr(task.request, REQUEST_ID_HEADER, None)) if task else None
    current_request_id.set(request_id)


@task_postrun.connect
def request_id_forgotten(**_: Any) -> None:
    current_request_id.set(None)


@celeryd_init.connect
def worker_reports_errors(**_: Any) -> None:
    """Error reports in the worker's main process, before it forks: Sentry wraps the tasks'
    tracers, which the pool processes build before worker_process_init (its sending thread
    starts again in each of them)."""
    error_reports_setup(service="worker")


@worker_process_init.connect
def worker_traced(**_: Any) -> None:
    """Tracing in each pool process, after the fork (the exporter's thread would not survive
    one)."""
    tracing_setup(service="worker")


@beat_init.connect
def beat_observed(**_: Any) -> None:
    """Celery's own beat (earlier releases' scheduler, still runnable)."""
    observability_setup(service="beat")
