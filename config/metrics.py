"""``/metrics`` in the Prometheus text format, from the room's private registry: a reader
above the queue.

Per-event gauges and counters are read from the room's own state at scrape time; request
latencies are histograms observed in the web processes (queueing/web/latency.py). With
several gunicorn workers, set ``PROMETHEUS_MULTIPROC_DIR`` (``make run`` does) so that every
worker's observations count. ``waitingroom_build_info`` names the release each process runs
(config/version.py), in both shapes.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from config.health import readiness
from config.version import BUILD
from events.models import Event
from queueing.line.activity import events_with_fans
from queueing.line.reads import event_layout, line_reads
from queueing.records.scheduler_lease import scheduler_state
from queueing.rules.states import EntryStatus
from queueing.scheduler import LEASE_NAME, ROOM_TICK_TASK
from queueing.web.callers import client_ip
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
        # what the catalogue holds (an on-sale nobody is in has no line and nobody inside).
        events = Event.objects.filter(pk__in=events_with_fans()).annotate(
            # A fan who went back in line counts the admission of their earlier session
            # (cleared from admitted_at while they wait again): the counter never goes back.
            admitted_total=Count("entries", filter=Q(entries__admitted_at__isnull=False))
            + Count("entries", filter=Q(entries__reentered_at__isnull=False)),
            active_now=Count("entries", filter=Q(entries__status=EntryStatus.ADMITTED)),
            expired_total=Count("entries", filter=Q(entries__status=EntryStatus.EXPIRED)),
        )
        for event in events:
            layout = event_layout(event.id)
            line = line_reads.counts(layout).queue_length if layout else 0
            waiting.add_metric([event.slug], line)
            active.add_metric([event.slug], event.active_now)
            admissions.add_metric([event.slug], event.admitted_total)
            expirations.add_metric([event.slug], event.expired_total)
        yield from (waiting, active, admissions, expirations)


REGISTRY.register(EventCollector())


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


REGISTRY.register(ReadinessCollector())


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


REGISTRY.register(BuildInfoCollector())


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


REGISTRY.register(SchedulerCollector())


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
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        registry.register(EventCollector())
        registry.register(ReadinessCollector())
        registry.register(BuildInfoCollector())
        registry.register(SchedulerCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
