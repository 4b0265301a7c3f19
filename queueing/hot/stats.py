"""Figures the room keeps beside the line: measured throughput, per-minute line samples for
the dashboard, the last tick (for snapshots of newly opened pages), and the room's own
counters for ``/metrics`` (ticks dispatched and dropped, index rebuilds).

The room's counters are counted where they happen, in the workers, which serve no
``/metrics`` of their own: in one Redis hash, so that every web process reads the same
figures at scrape (dashboards take ``max`` over processes). Counting them fails open: a
counter is not worth a tick or a rebuild, and Redis away loses only the count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from queueing.hot import keys
from queueing.hot.client import (
    ASYNC_REDIS_FAILURES,
    HotIndexUnavailable,
    async_client_ready,
    client,
    fails_open,
    unavailable_on_redis_error,
)
from queueing.rules.eta import Throughput


@unavailable_on_redis_error
def write_throughput(event_id: int, throughput: Throughput) -> None:
    client().hset(
        keys.stats(event_id),
        mapping={
            "lam": repr(throughput.lam),
            "scv": repr(throughput.scv),
            "measured": int(throughput.measured),
            "err": repr(throughput.rel_err),
            "ranged": int(throughput.ranged),
            "tiers": json.dumps(throughput.tier_lams),
        },
    )


def _throughput(raw: dict[bytes, bytes]) -> Throughput | None:
    if not raw:
        return None
    return Throughput(
        lam=float(raw[b"lam"]),
        scv=float(raw[b"scv"]),
        measured=raw[b"measured"] == b"1",
        # Written by an earlier release without them: read as before.
        rel_err=float(raw.get(b"err", b"0")),
        ranged=raw.get(b"ranged") == b"1",
        tier_lams=tuple((int(t), float(lam)) for t, lam in json.loads(raw.get(b"tiers", b"[]"))),
    )


@unavailable_on_redis_error
def read_throughput(event_id: int) -> Throughput | None:
    return _throughput(client().hgetall(keys.stats(event_id)))


async def read_throughput_async(event_id: int) -> Throughput | None:
    try:
        redis_client = await async_client_ready()
        return _throughput(await redis_client.hgetall(keys.stats(event_id)))
    except ASYNC_REDIS_FAILURES as exc:
        raise HotIndexUnavailable(str(exc)) from exc


@unavailable_on_redis_error
def record_line_sample(event_id: int, *, minute: int, queue_length: int) -> None:
    pipe = client().pipeline(transaction=False)
    pipe.hset(keys.line_samples(event_id), str(minute), queue_length)
    pipe.expire(keys.line_samples(event_id), settings.WR_LINE_SAMPLES_SECONDS)
    pipe.execute()


@unavailable_on_redis_error
def line_samples(event_id: int, minutes: Sequence[int]) -> list[int | None]:
    raw = client().hmget(keys.line_samples(event_id), [str(m) for m in minutes])
    return [None if value is None else int(value) for value in raw]


@unavailable_on_redis_error
def remember_tick(event_id: int, text: str) -> None:
    client().set(keys.last_tick(event_id), text, ex=settings.WR_TICK_CACHE_SECONDS)


@unavailable_on_redis_error
def last_tick(event_id: int) -> str | None:
    raw = client().get(keys.last_tick(event_id))
    return raw.decode() if raw is not None else None


async def last_tick_async(event_id: int) -> str | None:
    try:
        redis_client = await async_client_ready()
        raw = await redis_client.get(keys.last_tick(event_id))
    except ASYNC_REDIS_FAILURES as exc:
        raise HotIndexUnavailable(str(exc)) from exc
    return raw.decode() if raw is not None else None


# The room's counters (fields of keys.room_counters()).
TICKS_DISPATCHED = "ticks_dispatched"
TICKS_DROPPED = "ticks_dropped"
REBUILDS = "rebuilds"
REBUILD_SECONDS_SUM = "rebuild_seconds_sum"
# Upper bounds of the rebuild durations' histogram, in seconds: a small line's rebuild takes
# milliseconds, a million fans' about 45 s (docs/benchmarks.md).
REBUILD_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0)


def _bucket_field(bound: float) -> str:
    return f"rebuild_le_{bound:g}"


@fails_open()
@unavailable_on_redis_error
def room_counter_add(name: str, amount: int = 1) -> None:
    client().hincrby(keys.room_counters(), name, amount)


@fails_open()
@unavailable_on_redis_error
def rebuild_observe(seconds: float) -> None:
    """One rebuild of an on-sale's index, and how long it took (cumulative buckets, as
    Prometheus's histograms count them)."""
    pipe = client().pipeline(transaction=False)
    pipe.hincrby(keys.room_counters(), REBUILDS, 1)
    pipe.hincrbyfloat(keys.room_counters(), REBUILD_SECONDS_SUM, seconds)
    for bound in REBUILD_BUCKETS:
        if seconds <= bound:
            pipe.hincrby(keys.room_counters(), _bucket_field(bound), 1)
    pipe.execute()


@dataclass(frozen=True)
class RoomCounters:
    ticks_dispatched: int
    ticks_dropped: int
    rebuilds: int
    rebuild_seconds_sum: float
    rebuild_buckets: tuple[tuple[float, int], ...]  # (upper bound, rebuilds that short)


@unavailable_on_redis_error
def room_counters() -> RoomCounters:
    """One read of the room's counters (0 for those never counted)."""
    raw = client().hgetall(keys.room_counters())

    def number(field: str) -> float:
        return float(raw.get(field.encode(), b"0"))

    return RoomCounters(
        ticks_dispatched=int(number(TICKS_DISPATCHED)),
        ticks_dropped=int(number(TICKS_DROPPED)),
        rebuilds=int(number(REBUILDS)),
        rebuild_seconds_sum=number(REBUILD_SECONDS_SUM),
        rebuild_buckets=tuple(
            (bound, int(number(_bucket_field(bound)))) for bound in REBUILD_BUCKETS
        ),
    )
