"""A preview of an on-sale's line before the sale: its settings and an expected arrival curve
run through the room's own admission rules on a simulated clock. Pure: no I/O, no HTTP.

The model, step by step (one step = one tick of the room, ``tick_seconds``):

- **Arrivals**: the pre-queue is in line at the start; each segment of the curve ("50,000 fans
  in the first 10 minutes") brings its fans evenly over its minutes. A share
  ``abandon_share`` never reaches the front (they leave; they take no place in the shop).
- **The shop**: an admitted fan stays ``shop_seconds`` on average (exponentially, never past
  ``session_seconds``), as a fluid: each step, ``inside * step / mean`` leave (the rate of a
  shop whose places are refilled as soon as they free, as the room's slot-freed trigger does).
- **Admission**: each step lets in ``min(capacity - inside, rate credit, 60-second window room,
  batch limit)`` (``rules/admission_plan.py``: ``bucket_refill`` with the burst cap,
  ``batch_size``), counted in fractions of fans like the rest of the fluid.
- **Waits**: fans are served in order (tiers are not modelled: the preview is of the whole
  line), so the i-th fan to arrive is the i-th admitted; their wait is the time between the
  two cumulative curves at height i.

A fluid of averages: real lines are lumpier (the rehearsals in ``rehearsal/`` drive the real
room; ``tests/test_rehearsal.py`` holds the two within 20% on the last fan's wait).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from queueing.rules.admission_plan import (
    RATE_WINDOW_SECONDS,
    TokenBucket,
    batch_size,
    bucket_refill,
)

MAX_STEPS = 200_000  # 55 hours of one-second ticks: the preview's horizon
MAX_SAMPLES = 240  # points of the chart
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ArrivalSegment:
    minutes: float
    fans: int


@dataclass(frozen=True)
class ForecastInputs:
    capacity: int
    rate_per_minute: int
    session_seconds: int
    shop_seconds: float  # how long an admitted fan stays in the shop, on average
    arrivals: tuple[ArrivalSegment, ...]
    prequeue_fans: int = 0
    abandon_share: float = 0.0
    tick_seconds: float = 1.0
    batch_limit: int = 500
    burst_seconds: float = 3.0


@dataclass(frozen=True)
class Sample:
    second: float
    in_line: float
    in_shop: float


@dataclass(frozen=True)
class Forecast:
    fans: int  # who reach the front (abandoners left out)
    admitted: int
    samples: tuple[Sample, ...]
    peak_line: int
    first_wait: float | None
    median_wait: float | None
    p90_wait: float | None
    last_wait: float | None
    empty_at: float | None  # seconds after the start; None: not within the horizon
    horizon_seconds: float

    @property
    def pace_per_minute(self) -> float | None:
        if self.empty_at is None or not self.empty_at:
            return None
        return self.admitted / self.empty_at * 60


def _arrived_by(inputs: ForecastInputs, second: float) -> float:
    """Fans who will reach the front and have joined by ``second`` after the start."""
    arrived = float(inputs.prequeue_fans)
    start = 0.0
    for segment in inputs.arrivals:
        length = segment.minutes * 60
        if second >= start + length:
            arrived += segment.fans
        elif second > start:
            arrived += segment.fans * (second - start) / length
        start += length
    return arrived * (1 - inputs.abandon_share)


def _last_arrival(inputs: ForecastInputs) -> float:
    return sum(segment.minutes * 60 for segment in inputs.arrivals)


def _time_at(heights: list[float], times: list[float], height: float) -> float | None:
    """When the cumulative curve ``heights`` (over ``times``) first reaches ``height``,
    linearly within a step."""
    index = bisect_left(heights, height - 1e-9)
    if index >= len(heights):
        return None
    if index == 0:
        return times[0]
    h0, h1 = heights[index - 1], heights[index]
    t0, t1 = times[index - 1], times[index]
    return t0 + (t1 - t0) * (height - h0) / (h1 - h0) if h1 > h0 else t1


def forecast(inputs: ForecastInputs) -> Forecast:
    step = inputs.tick_seconds
    stay = max(0.001, min(inputs.shop_seconds, float(inputs.session_seconds or math.inf)))
    # The room refills a place as soon as it frees (the slot-freed trigger), so the shop runs
    # full at ``inside / stay`` departures a second, not the discrete ``1 - exp(-step / stay)``.
    leave_share = min(1.0, step / stay)
    total = _arrived_by(inputs, math.inf)
    last_arrival = _last_arrival(inputs)
    bucket = TokenBucket(tokens=0.0, refilled_at=None)
    window: deque[tuple[float, float]] = deque()
    in_window = 0.0
    inside = 0.0
    admitted_total = 0.0
    times, arrived_curve, admitted_curve, samples = [0.0], [_arrived_by(inputs, 0.0)], [0.0], []
    empty_at = None
    second = 0.0
    for _ in range(MAX_STEPS):
        arrived = _arrived_by(inputs, second)
        in_line = arrived - admitted_total
        samples.append(Sample(second, in_line, inside))
        if second >= last_arrival and in_line < 0.5:
            empty_at = second
            break
        inside -= inside * leave_share
        now = _EPOCH + timedelta(seconds=second)
        if inputs.rate_per_minute:
            bucket = bucket_refill(
                bucket,
                rate_per_minute=inputs.rate_per_minute,
                burst_seconds=inputs.burst_seconds,
                now=now,
            )
            while window and window[0][0] <= second - RATE_WINDOW_SECONDS:
                in_window -= window.popleft()[1]
        room = batch_size(
            capacity=inputs.capacity,
            active=0,
            rate_per_minute=inputs.rate_per_minute,
            tokens=bucket.tokens,
            admitted_in_window=math.ceil(in_window - 1e-9),
            batch_limit=inputs.batch_limit,
        )
        if inputs.capacity:
            room = min(room, max(0.0, inputs.capacity - inside))
        n = max(0.0, min(float(room), in_line))
        if inputs.rate_per_minute:
            bucket = TokenBucket(tokens=max(0.0, bucket.tokens - n), refilled_at=bucket.refilled_at)
            window.append((second, n))
            in_window += n
        inside += n
        admitted_total += n
        second += step
        times.append(second)
        arrived_curve.append(_arrived_by(inputs, second))
        admitted_curve.append(admitted_total)
    fans = round(total)

    def wait_of(rank: float) -> float | None:
        came = _time_at(arrived_curve, times, rank)
        went = _time_at(admitted_curve, times, rank)
        return None if came is None or went is None else max(0.0, went - came)

    # The fluid's last fan is half a fan from the end: the line counts as empty below that.
    last = max(1.0, total - 0.5)
    waits = [wait_of(r) for r in (1.0, max(1.0, total * 0.5), max(1.0, total * 0.9), last)]
    every = max(1, math.ceil(len(samples) / MAX_SAMPLES))
    kept = samples[::every]
    if samples and kept[-1] is not samples[-1]:
        kept.append(samples[-1])
    return Forecast(
        fans=fans,
        admitted=round(admitted_total),
        samples=tuple(kept),
        peak_line=round(max((s.in_line for s in samples), default=0.0)),
        first_wait=waits[0] if total >= 1 else None,
        median_wait=waits[1] if total >= 1 else None,
        p90_wait=waits[2] if total >= 1 else None,
        last_wait=waits[3] if total >= 1 else None,
        empty_at=empty_at,
        horizon_seconds=MAX_STEPS * step,
    )
