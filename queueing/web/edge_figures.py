"""What each web process counts of its own for ``/metrics``: open WebSockets, joins waiting
for a batch, the 429s and 503s it answered (by their error code), and its PostgreSQL and
Redis pools. Dashboards add them up over processes (``sum``).

With ``PROMETHEUS_MULTIPROC_DIR`` (gunicorn's several workers) each process writes its
figures to the shared directory and the one answering a scrape adds up the live ones: the
gauges are ``livesum``. The pools and the join queue are sampled every few seconds by a
thread of each process (``figures_sampler_start``) and again by the process answering the
scrape, rather than set on the hot paths: a gauge written to the shared directory costs a
few microseconds, a join's share of which would be paid by every join for a figure
Prometheus reads every 15 s.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
import weakref
from typing import Protocol

from django.db.backends.postgresql.base import DatabaseWrapper
from prometheus_client import Counter, Gauge
from prometheus_client.multiprocess import mark_process_dead

from queueing.hot.client import pool_connections
from queueing.web.latency import REGISTRY

logger = logging.getLogger(__name__)

SAMPLE_SECONDS = 5.0

OPEN_SOCKETS = Gauge(
    "waitingroom_open_sockets",
    "WebSockets open on this web process.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
JOIN_QUEUE_DEPTH = Gauge(
    "waitingroom_join_queue_depth",
    "Joins waiting for a batch on the lean join path of this web process.",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
REFUSALS = Counter(
    "waitingroom_refusals",
    "429 and 503 answers, by status and error code (page: an HTML page's).",
    labelnames=("status", "reason"),
    registry=REGISTRY,
)
DB_POOL = Gauge(
    "waitingroom_db_pool_connections",
    "This process's PostgreSQL pool: size (connections open), idle, waiting (requests "
    "waiting for one).",
    labelnames=("state",),
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
REDIS_POOL = Gauge(
    "waitingroom_redis_pool_connections",
    "This process's Redis connections to the hot index: in_use, idle.",
    labelnames=("state",),
    multiprocess_mode="livesum",
    registry=REGISTRY,
)

REFUSED_STATUSES = frozenset({429, 503})


def refusal_counted(status: int, body: bytes, content_type: str) -> None:
    """Count one 429 or 503 by its code (``{"error": ...}``): asked only for those statuses,
    so that the answers which are not refusals cost a comparison."""
    reason = "page"
    if content_type.startswith("application/json"):
        try:
            reason = str(json.loads(body).get("error", "error"))[:40]
        except (ValueError, AttributeError):
            reason = "error"
    REFUSALS.labels(str(status), reason).inc()


class JoinQueue(Protocol):
    def depth(self) -> int: ...


# The lean join paths' queues of this process (queueing/web/join_batcher.py): one per app.
_join_queues: weakref.WeakSet[JoinQueue] = weakref.WeakSet()


def join_queue_watch(queue: JoinQueue) -> None:
    _join_queues.add(queue)


def process_sample() -> None:
    """This process's pools and join queue, as they are now."""
    JOIN_QUEUE_DEPTH.set(sum(queue.depth() for queue in list(_join_queues)))
    pool = DatabaseWrapper._connection_pools.get("default")
    if pool is not None:
        figures = pool.get_stats()
        DB_POOL.labels("size").set(figures.get("pool_size", 0))
        DB_POOL.labels("idle").set(figures.get("pool_available", 0))
        DB_POOL.labels("waiting").set(figures.get("requests_waiting", 0))
    in_use, idle = pool_connections()
    REDIS_POOL.labels("in_use").set(in_use)
    REDIS_POOL.labels("idle").set(idle)


_sampler_started = threading.Event()


def figures_sampler_start() -> None:
    """Start this process's sampler of its pools (once), and forget its figures when it
    exits, so that a dead worker's are not added up."""
    if _sampler_started.is_set():
        return
    _sampler_started.set()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        atexit.register(mark_process_dead, os.getpid())
    threading.Thread(target=_sample_forever, name="pool-figures", daemon=True).start()


def _sample_forever() -> None:
    while True:
        try:
            process_sample()
        except Exception:
            logger.exception("pool figures not sampled")
        time.sleep(SAMPLE_SECONDS)
