"""What a rehearsal shows about the room's promises. Pure: fans' outcomes in, figures out.

- **Coverage**: the share of admitted fans whose real wait, from the moment they were first
  shown a range to their admission, fell inside that range (p10–p90).
- **Error**: |real wait - quoted p50|, its median and 90th percentile; the median signed error
  says whether quotes run short (positive: fans waited longer than told).
- **Width**: the median of (p90 - p10) / real wait, so that coverage bought with ranges too
  wide to tell a fan anything shows.
- **Rises**: the share of fans whose shown p50 ever went up by more than ``RISE_SHARE`` (20%)
  over the lowest p50 they had been shown before, beyond ``RISE_SLACK_SECONDS`` (the room
  moves in ticks of a second, so a 2 s estimate becoming 3 s is not a broken promise).
- **Fairness**: per tier, pairs admitted out of their order key's order (inversions; the
  pre-queue's order key is its shuffled place), and Kendall's tau.
- **Throughput**: admissions per second while the line had fans, against the configured pace.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from dashboard.fairness import count_inversions, kendall_tau, percentiles

RISE_SHARE = 0.20
RISE_SLACK_SECONDS = 1.0


@dataclass(frozen=True)
class FanOutcome:
    tier: str
    prequeue: bool
    arrived_at: float
    quote: tuple[float, float, float] | None  # p10, p50, p90 first shown in line
    quoted_at: float | None
    admitted_at: float | None  # the room's admission time
    order_key: int | None
    shown_p50: Sequence[tuple[float, float]] = field(default_factory=tuple)
    left_at: float | None = None  # left the line without being admitted
    checked_out_at: float | None = None

    @property
    def out_of_line_at(self) -> float | None:
        return self.admitted_at if self.admitted_at is not None else self.left_at

    @property
    def waited(self) -> float | None:
        """From the first range shown to admission: what the quote promised about."""
        if self.admitted_at is None or self.quoted_at is None:
            return None
        return max(0.0, self.admitted_at - self.quoted_at)


def rose(shown: Sequence[tuple[float, float]]) -> bool:
    lowest: float | None = None
    for _, p50 in shown:
        if lowest is not None and p50 > lowest * (1 + RISE_SHARE) + RISE_SLACK_SECONDS:
            return True
        lowest = p50 if lowest is None else min(lowest, p50)
    return False


def quote_figures(fans: Sequence[FanOutcome]) -> dict[str, float | int | None]:
    judged = [f for f in fans if f.quote is not None and f.waited is not None]
    inside = [f for f in judged if f.quote and f.quote[0] <= (f.waited or 0) <= f.quote[2]]
    errors = [abs((f.waited or 0) - f.quote[1]) for f in judged if f.quote]
    signed = [(f.waited or 0) - f.quote[1] for f in judged if f.quote]
    widths = [(f.quote[2] - f.quote[0]) / max(1.0, f.waited or 0) for f in judged if f.quote]
    shown = [f for f in fans if len(f.shown_p50) > 1]
    rises = sum(rose(f.shown_p50) for f in shown)
    return {
        "quoted_and_admitted": len(judged),
        "coverage": round(len(inside) / len(judged), 3) if judged else None,
        "below_p10": sum(1 for f in judged if f.quote and (f.waited or 0) < f.quote[0]),
        "above_p90": sum(1 for f in judged if f.quote and (f.waited or 0) > f.quote[2]),
        "median_error_s": round(statistics.median(errors), 2) if errors else None,
        "p90_error_s": round(percentiles(errors, (90,))["p90"], 2) if errors else None,
        "median_signed_error_s": round(statistics.median(signed), 2) if signed else None,
        # How wide the ranges were (p90 - p10 over the real wait): coverage bought with
        # ranges too wide to tell a fan anything shows here.
        "median_relative_width": round(statistics.median(widths), 2) if widths else None,
        # Fans shown more than one p50 (a rise needs two), and those whose p50 rose: counts
        # as well as the share, so that scenarios can be pooled.
        "shown_twice": len(shown),
        "rises": rises,
        "rises_share": round(rises / len(shown), 3) if shown else None,
    }


def tier_figures(fans: Sequence[FanOutcome], line_started: float) -> dict[str, dict[str, object]]:
    tiers: dict[str, list[FanOutcome]] = {}
    for fan in fans:
        tiers.setdefault(fan.tier, []).append(fan)
    result: dict[str, dict[str, object]] = {}
    for name, members in tiers.items():
        admitted = [f for f in members if f.admitted_at is not None]
        waits = [(f.admitted_at or 0) - max(f.arrived_at, line_started) for f in admitted]
        ordered = sorted(
            (f for f in admitted if f.order_key is not None), key=lambda f: f.order_key or 0
        )
        # Microseconds: admissions of one batch share a time and are never counted inverted.
        inversions = count_inversions([round((f.admitted_at or 0) * 1e6) for f in ordered])
        result[name] = {
            "fans": len(members),
            "admitted": len(admitted),
            "left": sum(1 for f in members if f.left_at is not None),
            "wait_s": {k: round(v, 1) for k, v in percentiles(waits, (50, 90, 99)).items()},
            "inversions": inversions,
            "kendall_tau": kendall_tau(inversions, len(ordered)),
        }
    return result


def throughput_figures(
    fans: Sequence[FanOutcome], *, configured_pace: float | None
) -> dict[str, float | None]:
    times = sorted(f.admitted_at for f in fans if f.admitted_at is not None)
    measured = None
    if len(times) > 1 and times[-1] > times[0]:
        measured = (len(times) - 1) / (times[-1] - times[0])
    return {
        "admitted_per_s": round(measured, 3) if measured else None,
        "configured_pace_per_s": round(configured_pace, 3) if configured_pace else None,
        "against_configured": round(measured / configured_pace, 2)
        if measured and configured_pace
        else None,
    }


def line_length_over_time(
    fans: Sequence[FanOutcome], *, start: float, end: float, points: int = 120
) -> list[tuple[float, int]]:
    """How many were in line (arrived, not yet admitted or gone) at ``points`` moments."""
    step = max(0.5, (end - start) / points)
    samples = []
    moment = start
    while moment <= end:
        waiting = sum(
            1
            for f in fans
            if f.arrived_at <= moment and (f.out_of_line_at is None or f.out_of_line_at > moment)
        )
        samples.append((round(moment - start, 1), waiting))
        moment += step
    return samples


def realized(fans: Sequence[FanOutcome], *, line_started: float) -> dict[str, float | int | None]:
    """What actually happened, in the preview's terms (``queueing/rules/forecast.py``): fans
    in the pre-queue and after the start over how long, the share who gave up, the mean time
    from admission to checkout, and the wait of the last fan to arrive who was let in."""
    later = [f for f in fans if not f.prequeue]
    stays = [
        f.checked_out_at - f.admitted_at
        for f in fans
        if f.checked_out_at is not None and f.admitted_at is not None
    ]
    admitted = [f for f in fans if f.admitted_at is not None]
    last = max(admitted, key=lambda f: f.arrived_at, default=None)
    return {
        "prequeue_fans": len(fans) - len(later),
        "fans": len(later),
        "arrivals_seconds": round(
            max((f.arrived_at for f in later), default=line_started) - line_started, 2
        ),
        "gave_up_share": round(sum(1 for f in fans if f.left_at is not None) / len(fans), 3)
        if fans
        else 0.0,
        "mean_shop_seconds": round(statistics.fmean(stays), 3) if stays else None,
        "last_fan_wait_s": round((last.admitted_at or 0) - max(last.arrived_at, line_started), 2)
        if last
        else None,
    }
