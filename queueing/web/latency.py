"""Latencies of the fans' hottest requests, and the gate's traffic decisions, observed in each
web process: Prometheus histograms and counters in the room's private registry, which
``/metrics`` (config/metrics.py) exposes."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpResponse
from prometheus_client import CollectorRegistry, Counter, Histogram

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5)
REGISTRY = CollectorRegistry(auto_describe=True)
JOIN_SECONDS = Histogram(
    "waitingroom_join_seconds",
    "Join request latency.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
STATUS_SECONDS = Histogram(
    "waitingroom_status_seconds",
    "Ticket status request latency.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
GATE_SECONDS = Histogram(
    "waitingroom_gate_seconds",
    "Gate check (a web server's sub-request) latency.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)

# The gate's check, per on-sale (one that exists: a slug is anybody's to invent) and action of
# its traffic rules: bypass, queue (also no rule matching, and no rules) or block.
TRAFFIC_DECISIONS = Counter(
    "waitingroom_traffic_decisions",
    "Gate checks decided by the on-sale's traffic rules, by action.",
    labelnames=("event", "action"),
    registry=REGISTRY,
)
# The labelled children, found once: the check is asked on every request to a shop.
_decision_counters: dict[tuple[str, str], Any] = {}


def traffic_decision_counted(event: str, action: str) -> None:
    child = _decision_counters.get((event, action))
    if child is None:
        child = _decision_counters[(event, action)] = TRAFFIC_DECISIONS.labels(event, action)
    child.inc()


def observed(
    histogram: Histogram,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> HttpResponse:
            started = time.perf_counter()
            try:
                return view(*args, **kwargs)
            finally:
                histogram.observe(time.perf_counter() - started)

        return wrapper

    return decorate
