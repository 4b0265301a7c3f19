"""``/metrics`` in the Prometheus text format, from the room's private registry: a reader
above the queue.

Two kinds of figures, and how to add them up over the web processes (docs/api.md, "/metrics"):

- **The room's** (per on-sale: waiting, active, admissions, expirations; the scheduler's tick
  and lead; ticks dispatched and dropped, index rebuilds, kept in Redis by the workers; the
  Celery queue; failed chain verifications; dependencies out) are read from the shared store
  at scrape time, so every web process reports the same values: aggregate them with
  ``max``, never ``sum``. Reading them costs one query or call per family, per on-sale only
  for the on-sales with fans in the room, never per fan.
- **The process's** (request latencies, open sockets, the join queue, refusals, pools,
  django-prometheus's request, query and cache counts) are its own: ``sum`` them. With
  several gunicorn workers, set ``PROMETHEUS_MULTIPROC_DIR`` (``make run`` does) so that
  every worker's count. ``waitingroom_build_info`` names the release each process runs
  (config/version.py), in both shapes.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterator
from typing import Any

import prometheus_client
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from config.celery import app as celery_app
from config.health import readiness
from config.version import BUILD
from dashboard.models import AuditVerdict
from events.models import Event
from queueing.hot import stats
from queueing.hot.client import HotIndexUnavailable
from queueing.in_process import ProcessCache
from queueing.line.activity import events_with_fans
from queueing.line.reads import event_layout, line_reads
from queueing.records.entry_reads import entry_totals
from queueing.records.scheduler_lease import scheduler_state
from queueing.scheduler import LEASE_NAME, ROOM_TICK_TASK
from queueing.web.callers import client_ip
from queueing.web.edge_figures import process_sample
from queueing.web.latency import REGISTRY


class EventCollector(Collector):
    def describe(self) -> Iterator[Any]:
        # Registration asks for the names; answering without a query keeps the database
        # out of import time (URLs load before migrations on a fresh install).
        yield from self._families()

    def _families(self) -> tuple[Any, ...]:
        return (
            GaugeMetricFamily("waitingroom_waiting", "Fans in line.", labels=["event"]),
            GaugeMetricFamily(
                "waitingroom_active", "Fans admitted and in the shop.", labels=["event"]
            ),
            CounterMetricFamily(
                "waitingroom_admissions", "Fans admitted so far.", labels=["event"]
            ),
            CounterMetricFamily(
                "waitingroom_expirations", "Tickets expired so far.", labels=["event"]
            ),
        )

    def collect(self) -> Iterator[Any]:
        waiting, active, admissions, expirations = self._families()
        # On-sales with fans in the room only: a scrape costs what the busy ones cost, not
        # what the catalogue holds (an on-sale nobody is in has no line and nobody inside);
        # and per on-sale, never per fan in line (records/entry_reads.py, entry_totals).
        slugs = dict(Event.objects.filter(pk__in=events_with_fans()).values_list("pk", "slug"))
        totals = entry_totals(list(slugs))
        for event_id, slug in slugs.items():
            layout = event_layout(event_id)
            line = line_reads.counts(layout).queue_length if layout else 0
            waiting.add_metric([slug], line)
            active.add_metric([slug], totals[event_id].active)
            admissions.add_metric([slug], totals[event_id].admitted)
            expirations.add_metric([slug], totals[event_id].expired)
        yield from (waiting, active, admissions, expirations)


class ReadinessCollector(Collector):
    """The mode ``/readyz`` reports, per dependency: 1 while it is out (the room is down
    without PostgreSQL, degraded without Redis or the broker), 0 otherwise."""

    def describe(self) -> Iterator[Any]:
        yield self._family()

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "waitingroom_dependency_out",
            "1 while a dependency cannot be reached (impact: down or degraded).",
            labels=["dependency", "impact"],
        )

    def collect(self) -> Iterator[Any]:
        family = self._family()
        state = readiness()
        family.add_metric(["postgresql", "down"], 1 if "postgresql" in state.down else 0)
        family.add_metric(["redis", "degraded"], 1 if "redis" in state.degraded else 0)
        family.add_metric(["broker", "degraded"], 1 if "broker" in state.degraded else 0)
        yield family


class BuildInfoCollector(Collector):
    """``waitingroom_build_info{version,python,django} 1``: during a roll-out, which process
    runs which release (``/healthz`` says the same to a probe)."""

    def describe(self) -> Iterator[Any]:
        yield self._family()

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "waitingroom_build_info",
            "The release this process runs, with its Python and Django; always 1.",
            labels=list(BUILD),
        )

    def collect(self) -> Iterator[Any]:
        family = self._family()
        family.add_metric(list(BUILD.values()), 1)
        yield family


class SchedulerCollector(Collector):
    """How old the last room tick sent is (the scheduler's, queueing/scheduler.py: above a few
    seconds, no scheduler leads and nobody is let in on a tick) and how often the lead
    changed hands, from one query at scrape time."""

    def describe(self) -> Iterator[Any]:
        yield from self._families()

    def _families(self) -> tuple[GaugeMetricFamily, CounterMetricFamily]:
        return (
            GaugeMetricFamily(
                "waitingroom_room_tick_age_seconds",
                "Seconds since the scheduler last sent the room's tick (absent: never).",
            ),
            CounterMetricFamily(
                "waitingroom_scheduler_leader_changes",
                "Times the scheduler's lease went to another replica (the first lead counts).",
            ),
        )

    def collect(self) -> Iterator[Any]:
        age, changes = self._families()
        try:
            state = scheduler_state(lease=LEASE_NAME, tick_task=ROOM_TICK_TASK)
        except DatabaseError:
            # Without PostgreSQL the room is down, which waitingroom_dependency_out says.
            return
        if state.room_tick_age_seconds is not None:
            age.add_metric([], state.room_tick_age_seconds)
        changes.add_metric([], state.leader_changes)
        yield from (age, changes)


class RoomCountersCollector(Collector):
    """The room's counters the workers keep in Redis (queueing/hot/stats.py), one read:
    ticks dispatched and dropped, index rebuilds and their durations."""

    def describe(self) -> Iterator[Any]:
        yield from self._families()

    def _families(
        self,
    ) -> tuple[
        CounterMetricFamily, CounterMetricFamily, CounterMetricFamily, HistogramMetricFamily
    ]:
        return (
            CounterMetricFamily(
                "waitingroom_ticks_dispatched", "Ticks of on-sales sent to the workers."
            ),
            CounterMetricFamily(
                "waitingroom_ticks_dropped",
                "Ticks a worker dropped unrun, received past their expiry (stale).",
            ),
            CounterMetricFamily(
                "waitingroom_hot_index_rebuilds", "Rebuilds of an on-sale's hot index."
            ),
            HistogramMetricFamily(
                "waitingroom_hot_index_rebuild_seconds", "How long a hot-index rebuild took."
            ),
        )

    def collect(self) -> Iterator[Any]:
        dispatched, dropped, rebuilds, durations = self._families()
        try:
            counters = stats.room_counters()
        except HotIndexUnavailable:
            return  # Redis away: waitingroom_dependency_out says so
        dispatched.add_metric([], counters.ticks_dispatched)
        dropped.add_metric([], counters.ticks_dropped)
        rebuilds.add_metric([], counters.rebuilds)
        buckets = [(f"{bound:g}", count) for bound, count in counters.rebuild_buckets]
        durations.add_metric(
            [], [*buckets, ("+Inf", counters.rebuilds)], counters.rebuild_seconds_sum
        )
        yield from (dispatched, dropped, rebuilds, durations)


# The broker is asked at most this often per process, within this long.
QUEUE_DEPTH_SECONDS = 5.0
QUEUE_DEPTH_TIMEOUT_SECONDS = 1.0
_queue_depths: ProcessCache[str, int | None] = ProcessCache(
    "celery queue depths", seconds=QUEUE_DEPTH_SECONDS, max_entries=4
)


def celery_queue_depth(queue: str) -> int | None:
    """Messages ready in ``queue`` on the broker (None: the broker did not answer in time),
    kept QUEUE_DEPTH_SECONDS: every scrape of every process would otherwise open a
    connection."""
    fresh, depth = _queue_depths.fresh(queue)
    if fresh:
        return depth
    depth = None
    try:
        with celery_app.connection_for_write(
            settings.CELERY_BROKER_URL,
            connect_timeout=QUEUE_DEPTH_TIMEOUT_SECONDS,
            transport_options={
                "max_retries": 0,
                "socket_timeout": QUEUE_DEPTH_TIMEOUT_SECONDS,
            },
        ) as broker:
            broker.ensure_connection(max_retries=0, timeout=QUEUE_DEPTH_TIMEOUT_SECONDS)
            try:
                _, depth, _ = broker.default_channel.queue_declare(queue=queue, passive=True)
            except broker.channel_errors:
                depth = 0  # not declared yet (RabbitMQ), or empty (Redis keeps no empty list)
    except Exception:  # noqa: BLE001 - whatever the transport raises, no figure this time
        depth = None
    return _queue_depths.put(queue, depth)


class CeleryQueueCollector(Collector):
    """``waitingroom_celery_queue_depth{queue}``: messages ready in the room's queue."""

    def describe(self) -> Iterator[Any]:
        yield self._family()

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "waitingroom_celery_queue_depth",
            "Messages ready in the room's Celery queue on the broker (absent: no answer).",
            labels=["queue"],
        )

    def collect(self) -> Iterator[Any]:
        family = self._family()
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        depth = celery_queue_depth(queue)
        if depth is not None:
            family.add_metric([queue], depth)
        yield family


class AuditChainCollector(Collector):
    """``waitingroom_audit_chain_failures``: on-sales whose last chain verification found
    the trail broken (dashboard.AuditVerdict), one count."""

    def describe(self) -> Iterator[Any]:
        yield self._family()

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "waitingroom_audit_chain_failures",
            "On-sales whose last audit chain verification failed.",
        )

    def collect(self) -> Iterator[Any]:
        family = self._family()
        try:
            family.add_metric([], AuditVerdict.objects.filter(ok=False).count())
        except DatabaseError:
            return
        yield family


# The room's figures, read at scrape (the same in every process: ``max`` over them).
ROOM_COLLECTORS: tuple[Collector, ...] = (
    EventCollector(),
    ReadinessCollector(),
    BuildInfoCollector(),
    SchedulerCollector(),
    RoomCountersCollector(),
    CeleryQueueCollector(),
    AuditChainCollector(),
)
for _collector in ROOM_COLLECTORS:
    REGISTRY.register(_collector)


def _may_scrape(request: HttpRequest) -> bool:
    """A bearer token when WR_METRICS_TOKEN is set; otherwise loopback and private networks
    only (the figures name every on-sale, unannounced ones too)."""
    if settings.WR_METRICS_TOKEN:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            token.encode(), settings.WR_METRICS_TOKEN.encode()
        )
    # Behind our proxies the peer is a proxy, on a private network itself: judge the client
    # the proxies name (WR_TRUSTED_PROXY_COUNT), as the join limits do.
    try:
        client = ipaddress.ip_address(client_ip(request))
    except ValueError:
        return False
    return client.is_loopback or client.is_private


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _may_scrape(request):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    # This process's pools and join queue as they are now (the others' are sampled:
    # queueing/web/edge_figures.py).
    process_sample()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Every process's own figures (ours and django-prometheus's) from the shared
        # directory, and the room's read here once.
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        for collector in ROOM_COLLECTORS:
            registry.register(collector)
        body = generate_latest(registry)
    else:
        body = generate_latest(REGISTRY) + generate_latest(prometheus_client.REGISTRY)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
