"""The report's scales: how wide a time bucket or a wait bin is. Pure: no I/O.

Widths come from a short list of round durations, so that the axes read "every 5 min", not
"every 317 s", and a chart never has more bars than it can show legibly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# At most this many bars on a chart over time, and bins in a histogram of waits.
MAX_BUCKETS = 120
MAX_BINS = 40

MINUTE, HOUR, DAY = 60, 3600, 86400
ROUND_SECONDS = (
    *(1, 2, 5, 10, 15, 30),
    *(MINUTE * m for m in (1, 2, 5, 10, 15, 30)),
    *(HOUR * h for h in (1, 2, 3, 6, 12)),
    DAY,
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def round_width(span_seconds: float, *, most: int, least: int = 1) -> int:
    """The smallest round width, at least ``least`` seconds, that cuts ``span_seconds`` into at
    most ``most`` pieces; past a day, whole days."""
    span = max(0.0, span_seconds)
    for width in ROUND_SECONDS:
        if width >= least and math.ceil(span / width) <= most:
            return width
    return DAY * max(1, math.ceil(span / DAY / most))


@dataclass(frozen=True)
class Timeline:
    """Buckets of ``seconds`` from ``origin`` (aligned on the width, in UTC), ``count`` of them."""

    origin: datetime
    seconds: int
    count: int

    def start(self, index: int) -> datetime:
        return self.origin + timedelta(seconds=index * self.seconds)


def timeline(first: datetime, last: datetime) -> Timeline:
    """Buckets covering ``first`` to ``last`` (both included), 10 s at the finest."""
    seconds = round_width((last - first).total_seconds(), most=MAX_BUCKETS - 1, least=10)
    since_epoch = (first - _EPOCH).total_seconds()
    origin = _EPOCH + timedelta(seconds=math.floor(since_epoch / seconds) * seconds)
    count = math.floor((last - origin).total_seconds() / seconds) + 1
    return Timeline(origin=origin, seconds=seconds, count=max(1, min(count, MAX_BUCKETS)))


def wait_bin_seconds(longest_wait: float) -> int:
    """The width of a histogram bin for waits up to ``longest_wait`` seconds."""
    return round_width(longest_wait, most=MAX_BINS - 1)


def duration_text(seconds: float | None) -> str:
    """A duration as people say it: 45 s, 2 min 05 s, 12 min, 1 h 05 min, 3 d 4 h."""
    if seconds is None:
        return "—"
    whole = round(seconds)
    if whole < 0:
        return f"-{duration_text(-whole)}"
    if whole < MINUTE:
        return f"{whole} s"
    if whole < HOUR:
        minutes, rest = divmod(whole, MINUTE)
        return f"{minutes} min" if minutes >= 10 or not rest else f"{minutes} min {rest:02d} s"
    if whole < 2 * DAY:
        hours, rest = divmod(whole, HOUR)
        return f"{hours} h {rest // MINUTE:02d} min"
    days, rest = divmod(whole, DAY)
    return f"{days} d {rest // HOUR} h"
