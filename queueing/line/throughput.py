"""The admission pace behind wait estimates, as the status path reads it.

Measured by the admission run and kept in the hot index; read here at most once a second per
process and event, falling back to the event's configured pace (assumed Poisson).
"""

from __future__ import annotations

import threading
import time

from queueing.hot import stats
from queueing.hot.client import HotIndexUnavailable
from queueing.rules.eta import Throughput
from queueing.rules.layout import EventLayout

CACHE_SECONDS = 1.0
_cache: dict[int, tuple[float, Throughput | None]] = {}
_lock = threading.Lock()


def _cached(layout: EventLayout) -> tuple[bool, Throughput | None]:
    cached = _cache.get(layout.event_id)
    if cached is not None and cached[0] > time.monotonic():
        return True, cached[1]
    return False, None


def _remember(layout: EventLayout, measured: Throughput | None) -> Throughput | None:
    # Nothing written yet (or Redis away): what the settings alone say (rules/eta.py).
    throughput = measured if measured is not None else layout.settings_pace
    with _lock:
        _cache[layout.event_id] = (time.monotonic() + CACHE_SECONDS, throughput)
    return throughput


def current_throughput(layout: EventLayout) -> Throughput | None:
    hit, throughput = _cached(layout)
    if hit:
        return throughput
    try:
        measured = stats.read_throughput(layout.event_id)
    except HotIndexUnavailable:
        measured = None
    return _remember(layout, measured)


async def current_throughput_async(layout: EventLayout) -> Throughput | None:
    hit, throughput = _cached(layout)
    if hit:
        return throughput
    try:
        measured = await stats.read_throughput_async(layout.event_id)
    except HotIndexUnavailable:
        measured = None
    return _remember(layout, measured)


def throughput_cache_clear() -> None:
    with _lock:
        _cache.clear()
