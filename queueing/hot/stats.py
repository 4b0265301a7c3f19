"""Figures the room keeps beside the line: measured throughput, per-minute line samples for
the dashboard, and the last tick (for snapshots of newly opened pages).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from django.conf import settings

from queueing.hot import keys
from queueing.hot.client import (
    ASYNC_REDIS_FAILURES,
    HotIndexUnavailable,
    async_client_ready,
    client,
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
