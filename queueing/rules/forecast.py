"""A preview of an on-sale's line before the sale: its settings and an expected arrival curve
run through the room's own admission rules on a simulated clock. Pure: no I/O, no HTTP.

The model is a fluid: counts per step (fractions of fans included), never one object per fan,
so 50,000 fans over hours of simulated time take a fraction of a second. One step is one tick
of the room (``tick_seconds``; a longer step only when the horizon would need more than
``MAX_STEPS`` ticks, which a sub-second tick over a day does). At each step, in the order of
the room's tick (``queueing/beat.py``: expiry, then admission):

- **Arrivals**: the pre-queue is in line at the start (shuffled in the room: the order among
  them changes who waits how long, not the counts). Each segment of the curve ("50,000 fans
  in the first 10 minutes") brings its fans evenly over its minutes, one segment after the
  other; after the last, ``tail_per_minute`` keep coming. A share ``abandon_share`` never
  reaches the front: they are left out at arrival, as if they gave up before anyone behind
  them was let in (the line looks a little shorter than it is; the waits are right).
- **Sessions that end**: a fan let in stays in the shop for an exponential time of mean
  ``shop_seconds`` and is out at the first tick after ``session_seconds`` at the latest (the
  pass expires; ``line/expiry.py``). Followed per cohort (the fans let in in one step):
  all of them decay together, and each cohort's survivors leave when its session runs out.
- **The tick's admission run** (``line/admission.py``): ``n = min(capacity - in the shop,
  rate credit, 60-second window room, batch limit)`` and no more than wait, with the rules
  of ``rules/admission_plan.py`` themselves: ``bucket_refill`` (credit for the time since the
  last run, capped at ``burst_seconds``; a first run starts with one second's worth),
  ``batch_size`` (the credit counted in whole fans) and ``RATE_WINDOW_SECONDS``. Capacity 0
  or rate 0: no limit.
- **Slots freed between ticks**: when the shop reports a fan done, the room runs an admission
  at once (``line/sessions.py``, ``admission_soon``) rather than at the next tick, so a
  capacity-bound shop stays full. Modelled within the step: those who leave during it are
  replaced as they leave, out of the fans waiting by the step's end, within the rate's credit
  and window, spread evenly over the step; places still free after the tick are filled by
  those runs too, up to the batch limit per departure. A fan let in mid-step may leave before
  the step ends and be replaced in turn (the share ``within`` below), so a full shop lets in
  ``capacity × step / mean`` per step however short the stay. A session that runs out frees
  its place only at a tick, as in the room.
- **Waits**: one line, first come, first served (tiers are not modelled: ``split_batch`` only
  shares ``n`` out between tiers, it never changes ``n``). The fan of rank r arrives when the
  arrival curve reaches r and is let in when the admissions reach r: their wait is the time
  between the two (admissions at a tick count at the tick; those between ticks are spread
  evenly over the step).

Left out: passthrough, safety-net and maintenance modes (the preview is of an on-sale in
``queue`` mode; in ``safety_net`` a fan who finds nobody ahead and room goes in at the join,
less than a tick sooner); fans whose tab stopped answering (expired at the front instead of
let in, the next run lets in another); the shop's own hiccups; the tens of milliseconds a
slot-freed run takes to start (with stays of a few seconds the real shop runs a few percent
slower than ``capacity / stay``; with stays of minutes it does not show); randomness: a fluid
of averages, where a real line is lumpier. The rehearsals in ``rehearsal/`` drive the real
room with the same settings; the two are held to agree within 20% on the last fan's wait
(six rehearsals of four kinds agreed within 8%: docs/architecture.md).

Over 350 lines on purpose: one simulation, its inputs and its figures, read in one place.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from queueing.rules.admission_plan import (
    RATE_WINDOW_SECONDS,
    TokenBucket,
    batch_size,
    bucket_refill,
)

HORIZON_SECONDS = 24 * 3600.0  # the longest a preview simulates
MAX_STEPS = 90_000  # a day of one-second ticks: the bound on the work of one preview
MAX_SAMPLES = 300  # points of the line over time, for a chart
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # the simulated clock's zero (any date will do)


@dataclass(frozen=True)
class ArrivalSegment:
    """``fans`` arriving evenly over ``minutes``, after the segments before it (0 minutes:
    all at once)."""

    minutes: float
    fans: int


@dataclass(frozen=True)
class ForecastInputs:
    capacity: int  # 0 = no limit
    rate_per_minute: int  # 0 = no limit
    session_seconds: int  # a fan let in is out after this at the latest
    shop_seconds: float  # mean time in the shop (exponential) of a fan let in
    arrivals: tuple[ArrivalSegment, ...] = ()
    prequeue_fans: int = 0  # in line at the start
    abandon_share: float = 0.0  # of every fan, who give up before the front
    tail_per_minute: float = 0.0  # arrivals after the last segment
    tick_seconds: float = 1.0  # WR_TICK_SECONDS
    batch_limit: int = 500  # WR_ADMISSION_BATCH
    burst_seconds: float = 3.0  # WR_ADMISSION_BURST_SECONDS
    horizon_seconds: float = HORIZON_SECONDS

    def __post_init__(self) -> None:
        checks = {
            "capacity": self.capacity >= 0,
            "rate_per_minute": self.rate_per_minute >= 0,
            "session_seconds": self.session_seconds > 0,
            "shop_seconds": self.shop_seconds > 0,
            "arrivals": all(0 <= s.minutes < math.inf and s.fans >= 0 for s in self.arrivals),
            "prequeue_fans": self.prequeue_fans >= 0,
            "abandon_share": 0 <= self.abandon_share < 1,
            "tail_per_minute": self.tail_per_minute >= 0,
            "tick_seconds": self.tick_seconds > 0,
            "batch_limit": self.batch_limit >= 1,
            "burst_seconds": self.burst_seconds >= 0,
            "horizon_seconds": 0 < self.horizon_seconds <= HORIZON_SECONDS,
        }
        wrong = [name for name, fine in checks.items() if not (fine and _finite(self, name))]
        if wrong:
            raise ValueError(f"out of range: {', '.join(wrong)}")


def _finite(inputs: ForecastInputs, name: str) -> bool:
    value = getattr(inputs, name)
    return not isinstance(value, float) or math.isfinite(value)


@dataclass(frozen=True)
class Sample:
    second: float  # after the start
    in_line: float  # waiting, just before the tick's admission run
    in_shop: float


@dataclass(frozen=True)
class Forecast:
    fans: int  # who reach the front: the pre-queue and the segments, less those who give up
    admitted: int  # let in before the simulation stopped (the tail's fans too)
    samples: tuple[Sample, ...]  # evenly spaced in time, the last one where it stopped
    peak_line: int
    first_wait: float | None  # seconds; None: not let in within the horizon
    median_wait: float | None
    p90_wait: float | None
    last_wait: float | None
    empty_at: float | None  # seconds after the start; None: not within the horizon
    horizon_seconds: float
    step_seconds: float
    pace_per_minute: float | None  # the most a minute the settings let in; None: no limit
    throughput_per_minute: float  # let in a minute on average, the start to empty_at


def shop_stay_seconds(inputs: ForecastInputs) -> float:
    """The mean time a fan holds a place: the exponential stay cut at the session's end."""
    return inputs.shop_seconds * -math.expm1(-inputs.session_seconds / inputs.shop_seconds)


def settings_pace_per_minute(inputs: ForecastInputs) -> float | None:
    """The most fans a minute the settings let in once the line is long: the rate, the
    capacity over the time a fan holds a place, or the batch limit every tick."""
    limits = [inputs.batch_limit * 60 / inputs.tick_seconds]
    if inputs.rate_per_minute:
        limits.append(float(inputs.rate_per_minute))
    if inputs.capacity:
        limits.append(inputs.capacity * 60 / shop_stay_seconds(inputs))
    pace = min(limits)
    # Only the batch limit: a room with no limit of its own.
    return None if not inputs.rate_per_minute and not inputs.capacity else pace


class _ArrivalCurve:
    """How many of the fans who reach the front have joined by a time, and back."""

    def __init__(self, inputs: ForecastInputs) -> None:
        keep = 1 - inputs.abandon_share
        self.starts: list[float] = []
        self.before: list[float] = []  # counted by each segment's start
        self.per_second: list[float] = []  # math.inf: all at the start
        joined, second = inputs.prequeue_fans * keep, 0.0
        for segment in inputs.arrivals:
            length = segment.minutes * 60
            self.starts.append(second)
            self.before.append(joined)
            self.per_second.append(segment.fans * keep / length if length else math.inf)
            joined += segment.fans * keep
            second += length
        self.prequeue = inputs.prequeue_fans * keep
        self.counted = joined  # the fans the waits are of: the tail comes after
        self.end = second
        self.tail_per_second = inputs.tail_per_minute / 60 * keep

    def joined_by(self, second: float) -> float:
        if second >= self.end:
            return self.counted + (second - self.end) * self.tail_per_second
        index = bisect_right(self.starts, second) - 1
        if index < 0:
            return self.prequeue
        rate = self.per_second[index]
        if math.isinf(rate):
            return self.before[index + 1] if index + 1 < len(self.before) else self.counted
        return self.before[index] + (second - self.starts[index]) * rate

    def arrival_of(self, rank: float) -> float:
        """When the fan of ``rank`` (counted from 1, fractions allowed) joins."""
        if rank <= self.prequeue:
            return 0.0
        for i, start in enumerate(self.starts):
            after = self.before[i + 1] if i + 1 < len(self.before) else self.counted
            if rank <= after:
                rate = self.per_second[i]
                if math.isinf(rate) or not rate:
                    return start
                return start + max(0.0, rank - self.before[i]) / rate
        return self.end  # only rounding brings a counted rank past the last segment


class _Crossings:
    """When a count that only grows first reaches each of some heights: the count grows by
    jumps (a tick's run) or evenly over a span (the runs between ticks)."""

    def __init__(self, heights: list[float], tolerance: float) -> None:
        self.heights = sorted(heights)
        self.times: list[float | None] = [None] * len(heights)
        self.found = 0
        self.tolerance = tolerance

    @property
    def complete(self) -> bool:
        return self.found == len(self.heights)

    def grow(self, start: float, end: float, before: float, after: float) -> None:
        while self.found < len(self.heights) and self.heights[self.found] <= after + self.tolerance:
            height = self.heights[self.found]
            share = (height - before) / (after - before) if after > before else 1.0
            self.times[self.found] = start + (end - start) * min(1.0, max(0.0, share))
            self.found += 1


@dataclass
class _Pace:
    """The rate's bookkeeping as the room keeps it: the bucket, and what the last minute let
    in (``(second, fans)``, oldest first)."""

    rate_per_minute: int
    burst_seconds: float
    bucket: TokenBucket
    window: deque[tuple[float, float]]
    in_window: float = 0.0
    refilled_second: float | None = None

    def refill(self, second: float) -> None:
        # Refilled at this very second already (by the runs between ticks): nothing to earn.
        if self.refilled_second != second:
            self.refilled_second = second
            self.bucket = bucket_refill(
                self.bucket,
                rate_per_minute=self.rate_per_minute,
                burst_seconds=self.burst_seconds,
                now=_EPOCH + timedelta(seconds=second),
            )
        while self.window and self.window[0][0] <= second - RATE_WINDOW_SECONDS:
            self.in_window -= self.window.popleft()[1]

    def room(self) -> float:
        """What the credit and the window allow now, in fractions of fans."""
        return max(0.0, min(self.bucket.tokens, self.rate_per_minute - self.in_window))

    def spend(self, second: float, fans: float) -> None:
        self.bucket = TokenBucket(max(0.0, self.bucket.tokens - fans), self.bucket.refilled_at)
        self.window.append((second, fans))
        self.in_window += fans


def forecast(inputs: ForecastInputs) -> Forecast:
    curve = _ArrivalCurve(inputs)
    step = max(inputs.tick_seconds, inputs.horizon_seconds / MAX_STEPS)
    steps = math.ceil(inputs.horizon_seconds / step - 1e-9)
    mean = inputs.shop_seconds
    stays = math.exp(-step / mean)  # share of those inside at a tick still inside at the next
    # Of fans let in evenly through a step, the share who leave again before it ends.
    within = 1 + mean / step * math.expm1(-step / mean)
    # The first tick at which a session begun at a tick, or mid-step, has run out.
    session_ticks = math.ceil(inputs.session_seconds / step - 1e-9)
    session_ticks_mid = math.ceil((inputs.session_seconds + step / 2) / step - 1e-9)
    pace = (
        _Pace(inputs.rate_per_minute, inputs.burst_seconds, TokenBucket(0.0, None), deque())
        if inputs.rate_per_minute
        else None
    )
    counted = curve.counted
    tolerance = 1e-9 * max(1.0, counted)
    ranks = [min(counted, max(1.0, counted * share)) for share in (0.0, 0.5, 0.9, 1.0)]
    crossings = _Crossings(ranks if counted > 0 else [], tolerance)
    # Cohorts in the shop: (the tick their sessions run out, how many, as of which second).
    cohorts: deque[tuple[int, float, float]] = deque()
    inside = admitted = 0.0
    seconds: list[float] = []
    lines: list[float] = []
    shops: list[float] = []
    empty_at: float | None = None
    for k in range(steps + 1):
        second = k * step
        while cohorts and cohorts[0][0] <= k:
            _, size, since = cohorts.popleft()
            inside -= size * math.exp(-(second - since) / mean)
        inside = max(0.0, inside) if cohorts else 0.0
        waiting = max(0.0, curve.joined_by(second) - admitted)
        seconds.append(second)
        lines.append(waiting)
        shops.append(inside)
        if crossings.complete and second >= curve.end:
            if not curve.tail_per_second:
                empty_at = crossings.times[-1] if counted > 0 else second
                break
            if waiting <= curve.tail_per_second * step + tolerance:
                empty_at = second  # the backlog is gone: what is left came in this step
                break
        if k == steps:
            break

        # The tick's run.
        if pace is not None:
            pace.refill(second)
        n = float(
            batch_size(
                capacity=0,
                active=0,
                rate_per_minute=inputs.rate_per_minute,
                tokens=pace.bucket.tokens if pace else 0.0,
                admitted_in_window=math.ceil(pace.in_window - tolerance) if pace else 0,
                batch_limit=inputs.batch_limit,
            )
        )
        if inputs.capacity:
            n = min(n, inputs.capacity - inside)
        n = max(0.0, min(n, waiting))
        if n > 0:
            crossings.grow(second, second, admitted, admitted + n)
            admitted += n
            inside += n
            cohorts.append((k + session_ticks, n, second))
            if pace is not None:
                pace.spend(second, n)

        # Until the next tick: places freed by those who leave are filled at once.
        leaving = inside * (1 - stays)
        free = max(0.0, inputs.capacity - inside)  # what the tick's run left free
        inside -= leaving
        if inputs.capacity and leaving > 0:
            places = leaving / (1 - within) + min(free, leaving * inputs.batch_limit)
            extra = min(places, max(0.0, curve.joined_by(second + step) - admitted))
            if pace is not None:
                pace.refill(second + step)
                extra = min(extra, pace.room())
            if extra > 0:
                crossings.grow(second, second + step, admitted, admitted + extra)
                admitted += extra
                inside += extra * (1 - within)
                cohorts.append((k + session_ticks_mid, extra * (1 - within), second + step))
                if pace is not None:
                    pace.spend(second + step / 2, extra)

    stopped = seconds[-1]
    every = max(1, math.ceil(len(seconds) / (MAX_SAMPLES - 1)))
    kept = list(range(0, len(seconds), every))
    if kept[-1] != len(seconds) - 1:
        kept.append(len(seconds) - 1)
    arrivals = [curve.arrival_of(rank) for rank in crossings.heights]
    waits = [
        None if went is None else max(0.0, went - came)
        for came, went in zip(arrivals, crossings.times, strict=True)
    ] or [None] * 4
    through = empty_at if empty_at is not None else stopped
    return Forecast(
        fans=round(counted),
        admitted=round(admitted),
        samples=tuple(Sample(seconds[i], lines[i], shops[i]) for i in kept),
        peak_line=round(max(lines)),
        first_wait=waits[0],
        median_wait=waits[1],
        p90_wait=waits[2],
        last_wait=waits[3],
        empty_at=empty_at,
        horizon_seconds=steps * step,
        step_seconds=step,
        pace_per_minute=settings_pace_per_minute(inputs),
        throughput_per_minute=admitted / through * 60 if through > 0 else 0.0,
    )
