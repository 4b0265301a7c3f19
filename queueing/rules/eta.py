"""Wait estimates. Pure: no I/O, ``now`` passed in.

Admissions are treated as a renewal process with rate ``lam`` (fans per second) and squared
coefficient of variation ``scv`` of the gaps between admissions. The time until ``k`` more
fans are admitted then has mean ``k / lam`` and variance ``k * scv / lam**2``; we quote its
10th, 50th and 90th percentiles under a normal approximation. ``scv`` is estimated from
per-second admission counts (their index of dispersion, which tends to the gap SCV for a
renewal process); before enough samples exist, admissions are assumed Poisson (scv = 1) at
the configured pace.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

Z90 = 1.2815515655446004  # standard normal 90th percentile
MIN_SAMPLES = 20
WINDOW_SECONDS = 300


@dataclass(frozen=True)
class Throughput:
    lam: float  # admissions per second
    scv: float  # squared coefficient of variation of the gaps
    measured: bool


@dataclass(frozen=True)
class Eta:
    p10: float
    p50: float
    p90: float

    def as_dict(self) -> dict[str, float]:
        return {"p10": round(self.p10, 1), "p50": round(self.p50, 1), "p90": round(self.p90, 1)}


def configured_pace(*, rate_per_minute: int, capacity: int, session_seconds: int) -> float | None:
    """What the event is set to let through per second, before anything is measured."""
    if rate_per_minute:
        pace = rate_per_minute / 60.0
        if capacity:
            pace = min(pace, capacity / session_seconds) if session_seconds else pace
        return pace
    if capacity and session_seconds:
        return capacity / session_seconds
    return None


def measure_throughput(
    counts: Sequence[tuple[int, int]], *, now: datetime, prior_lam: float | None
) -> Throughput | None:
    """From admissions per second, ``(unix second, count)``, over the last WINDOW_SECONDS.

    The window starts at the first admission in it, so a sale that began a minute ago is
    measured over that minute; seconds without admissions count as zeros.
    """
    end = int(now.timestamp())
    recent = [(second, n) for second, n in counts if end - WINDOW_SECONDS < second <= end and n]
    total = sum(n for _, n in recent)
    if total >= MIN_SAMPLES:
        first = min(second for second, _ in recent)
        span = max(1, end - first + 1)
        bins = [0] * span
        for second, n in recent:
            bins[second - first] += n
        mean = total / span
        var = sum((b - mean) ** 2 for b in bins) / max(1, span - 1)
        return Throughput(lam=mean, scv=max(0.05, var / mean), measured=True)
    if prior_lam:
        return Throughput(lam=prior_lam, scv=1.0, measured=False)
    return None


def estimate_wait(position: int, throughput: Throughput | None) -> Eta | None:
    """Seconds until a fan at ``position`` (1 = next) is admitted."""
    if throughput is None or throughput.lam <= 0 or position < 1:
        return None
    mean = position / throughput.lam
    sd = math.sqrt(position * throughput.scv) / throughput.lam
    return Eta(p10=max(0.0, mean - Z90 * sd), p50=mean, p90=mean + Z90 * sd)
