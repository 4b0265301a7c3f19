"""Wait estimates. Pure: no I/O, ``now`` passed in.

**The pace.** What lets fans in is whichever limit binds:

- the **rate** (``rate_per_minute``): the admission run's token bucket lets exactly that many
  through, so the configured rate *is* the pace whenever it binds;
- the **capacity**: a fan goes in when another leaves the shop, so the pace is
  ``capacity / W``, with ``W`` the time a fan spends in the shop. The room measures ``W`` by
  Little's law from what the admission runs see anyway: how many left since the previous run
  (departures) and how many were inside (``W = mean inside / departures per second``). This
  holds whether or not the shop is full, so a half-empty shop is not mistaken for a slow
  one, and the burst that fills an empty shop at the start is not mistaken for the pace (an
  estimate from admission counts is ~15-25% fast for minutes after a start);
- neither: everyone goes in with the next batch; the measured admissions are the pace.

The pace is the smaller of the two limits. The capacity's is measured over the last
``PACE_WINDOW_SECONDS``, or since the shop changed if it did within it (checkouts got slower:
the runs are split where departures per fan inside differ most, and a difference beyond
``CHANGE_Z`` standard errors is a change, measured from then on); and, separately, over the
last ``SHORT_WINDOW_SECONDS``, leant on when it disagrees beyond its noise. Disagreement
widens the range either way, and so does a change not yet sure, as far as its evidence goes.
A halving shows beyond doubt only after some 10-15 s (at 3 departures a second): fans who
join before that are quoted the old pace with a range that reaches toward the new one.

**The range.** Admissions are a renewal process with rate ``lam`` and squared coefficient of
variation ``scv`` of the gaps (from the per-second admission counts, their index of
dispersion). The time until ``k`` more fans are admitted then has mean ``k / lam`` and
variance ``k * scv / lam**2`` from the process, plus ``(k / lam * rel_err)**2`` because the
pace itself is only known to a relative error ``rel_err`` (its sampling error, a floor for
what the model leaves out, the drift between the windows, and more in the first minute of a
sale, when the room is at its busiest), plus a tick's worth of phase.
The 10th, 50th and 90th percentiles are quoted under a normal approximation.

**Tiers.** A fan's position counts everyone now ahead of them, but the tiers served before
theirs (a fan club with strict priority) keep taking their part of the pace while the fan
waits: a fan of a later tier is quoted at the pace less what the tiers before their group
were admitted at over the last minute (``tier_lams``), never below ``MIN_TIER_SHARE`` of it.
Tiers of one weighted group share by weight, which the position already counts.

**Before anything is measured** (a capacity that may bind, fewer than ``MIN_DEPARTURES``
departures seen, or less than ``SETTLING_SECONDS`` since a pre-queue was let go), the room
says less rather than something wrong: no estimate ("measuring"), since the
settings bound the pace only from below (every fan using their whole session), which for a
shop whose checkouts take two seconds of a two-minute session is 50 times too slow; and the
first seconds after a pre-queue is let go are not the sale's pace. It takes a few seconds of
a sale, or 15 s after a pre-queue.

Over 350 lines on purpose: the pace, its uncertainty and the range quoted are one model,
mirrored line for line by the page (waiting.js) and pinned by its tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import pairwise

Z90 = 1.2815515655446004  # standard normal 90th percentile
MIN_SAMPLES = 20  # admissions before their variability is trusted
MIN_DEPARTURES = 10  # departures before the time in the shop is trusted
# Seconds after a pre-queue is let go before a capacity's pace is quoted, as long as the short
# window. Those first seconds are the least like the rest of the sale: the first fans all
# went in together, so the first to leave say little of the others, and the room is at its
# busiest (every pre-queue page being sent its place), its fans getting through slowly
# meanwhile. In the surge rehearsal the pace read 10/s at 3 s, 3.6/s at 7 s and 16/s from
# 18 s, and every pre-queue fan was quoted from the first of those ticks. A sale without a
# pre-queue fills as fans arrive and is quoted as soon as ``MIN_DEPARTURES`` have left.
SETTLING_SECONDS = 15
WINDOW_SECONDS = 300  # how long the runs keep their per-second counts
PACE_WINDOW_SECONDS = 60
SHORT_WINDOW_SECONDS = 15
# Standard errors beyond which the departures after a split mean the shop changed: the split
# is the likeliest of up to 60, and a steady shop's likeliest reaches 3 now and then
# (rehearsal/standin.py, steady: 2.5 made 18% of fans see their estimate rise, 3.0 8%, 3.5 3%).
CHANGE_Z = 3.5
MIN_CHANGE_SECONDS = 3
# What the model leaves out (fans ahead who leave, ticks, the shop's own variation over
# minutes), as a relative error of the pace: measured by the rehearsals (docs/benchmarks.md).
MODEL_ERROR = 0.10
# A pace measured over the first seconds of a sale is less sure than its sampling error says:
# the room is busiest then (every page connecting, every fan asking), so the pace it shows then
# is not yet the pace of the sale (the surge rehearsal: 14 a second for 30 s, then 19). Up to
# this much more relative error, fading out over the first PACE_WINDOW_SECONDS measured.
YOUNG_ERROR = 0.30
TICK_SD = 0.5  # seconds: admissions happen at ticks (or when a slot frees)
# A tier behind others is never quoted less than this share of the pace (their demand is
# measured, and may drop).
MIN_TIER_SHARE = 0.1


def admissions_record(
    counts: Sequence[Sequence[int]], *, second: int, admitted: int, window: int = WINDOW_SECONDS
) -> list[list[int]]:
    """The per-second admission counts ``(second, n)`` the pace is read from, with ``admitted``
    more at ``second`` (unix), those older than ``window`` forgotten."""
    kept = [[c[0], c[1]] for c in counts if c[0] > second - window]
    if admitted:
        if kept and kept[-1][0] == second:
            kept[-1][1] += admitted
        else:
            kept.append([second, admitted])
    return kept


def departures_record(
    runs: Sequence[Sequence[int]], *, second: int, left: int, inside: int
) -> list[list[int]]:
    """The admission runs' records ``(second, left since the previous run, inside after it)``
    with this run's added (runs of one second share a record: its departures summed, the
    last run's count inside), kept only for the minute the pace reads."""
    kept = [list(r) for r in runs if r[0] > second - PACE_WINDOW_SECONDS]
    if kept and kept[-1][0] == second:
        kept[-1] = [second, kept[-1][1] + left, inside]
    else:
        kept.append([second, left, inside])
    return kept


@dataclass(frozen=True)
class Throughput:
    lam: float  # admissions per second
    scv: float  # squared coefficient of variation of the gaps
    measured: bool
    rel_err: float = 0.0  # relative uncertainty of ``lam``
    # Not measured, and not known from the settings either: ``lam`` is only the slowest the
    # settings allow (every fan using their whole session). No estimate is quoted from it.
    ranged: bool = False
    # Per tier where it differs from ``lam``: what is left of the pace once the tiers served
    # before it took theirs, ((tier id, pace), ...).
    tier_lams: tuple[tuple[int, float], ...] = ()

    def pace_for(self, tier_id: int | None) -> float:
        for tier, lam in self.tier_lams:
            if tier == tier_id:
                return lam
        return self.lam


@dataclass(frozen=True)
class Eta:
    p10: float
    p50: float
    p90: float

    def as_dict(self) -> dict[str, float]:
        return {"p10": round(self.p10, 1), "p50": round(self.p50, 1), "p90": round(self.p90, 1)}


def configured_pace(*, rate_per_minute: int, capacity: int, session_seconds: int) -> float | None:
    """The slowest the settings allow: every fan uses their whole session (a bound, not a
    guess, while nothing is measured)."""
    if rate_per_minute:
        pace = rate_per_minute / 60.0
        if capacity:
            pace = min(pace, capacity / session_seconds) if session_seconds else pace
        return pace
    if capacity and session_seconds:
        return capacity / session_seconds
    return None


def capacity_may_bind(*, rate_per_minute: int, capacity: int, session_seconds: int) -> bool:
    """Whether the shop's capacity could ever be what holds fans back: not when the rate
    cannot fill it even if every fan stayed for their whole session."""
    if not capacity:
        return False
    return not rate_per_minute or capacity < rate_per_minute / 60.0 * session_seconds


@dataclass(frozen=True)
class _Rate:
    per_second: float
    scv: float
    events: int


def _per_second(counts: Sequence[Sequence[int]], *, end: int, window: int) -> _Rate | None:
    """Mean and index of dispersion of per-second counts ``(second, n, ...)`` over the last
    ``window`` seconds, from the first second with an event (a sale that began a minute ago is
    measured over that minute); seconds without events count as zeros."""
    recent = [(c[0], c[1]) for c in counts if end - window < c[0] <= end and c[1]]
    total = sum(n for _, n in recent)
    if not total:
        return None
    first = min(second for second, _ in recent)
    span = max(1, end - first + 1)
    bins = [0] * span
    for second, n in recent:
        bins[second - first] += n
    mean = total / span
    var = sum((b - mean) ** 2 for b in bins) / max(1, span - 1)
    return _Rate(per_second=mean, scv=max(0.05, var / mean), events=total)


@dataclass(frozen=True)
class _Stretch:
    """The shop over a stretch of time: departures and the inside-seconds they came out of."""

    left: int
    exposure: float  # inside-seconds (each fan inside, capped at the capacity, for a second)
    span: float  # seconds

    @property
    def per_inside_second(self) -> float:
        return self.left / self.exposure if self.exposure > 0 else 0.0


def _stretch(runs: Sequence[Sequence[float]], *, now: float, capacity: int) -> _Stretch | None:
    """From the runs ``(second, left since the previous run, inside after it)`` in time order,
    timed from the first to ``now`` (not in whole seconds: a sale two seconds old whose
    departures were counted over "seconds 1 to 3" would look half as fast). What the first
    run recorded as left happened before it, so it is not counted."""
    if not runs or now - runs[0][0] < 1.0:
        return None
    left = sum(int(r[1]) for r in runs[1:])
    exposure = 0.0
    for run, following in zip(runs, [*(r[0] for r in runs[1:]), now], strict=True):
        exposure += min(float(capacity), run[2]) * max(0.0, following - run[0])
    return _Stretch(left=left, exposure=exposure, span=now - runs[0][0])


@dataclass(frozen=True)
class _Split:
    at: int  # the index of the run from which on the shop may have changed
    z: float  # how unlikely the departures after it are if it did not (standard errors)
    rate: float  # departures per inside-second after it


def _likeliest_change(runs: Sequence[Sequence[float]], *, capacity: int) -> _Split | None:
    """The split of the runs where the shop most likely changed: the run from which on
    departures came at a rate (per fan inside) that the runs before make least likely.

    Each run's departures are set against the inside-seconds since the run before it (what
    they came out of), and nothing after the last run is counted: who leaves after it is
    only counted by the next one, so an open end would look like a shop that stopped.
    Given all ``K`` departures, those from a split on are binomial with the share of the
    inside-seconds from it on, if the shop did not change; a shop that halved its pace shows
    as far fewer. Testing every split finds a change with no window length to choose, and
    keeps finding the same split while the evidence grows, so that estimates do not flip.
    The last ``MIN_CHANGE_SECONDS`` are never a split of their own: the runs' timing shifts
    departures between neighbouring seconds."""
    left = [int(run[1]) for run in runs[1:]]
    exposure = [
        min(float(capacity), before[2]) * (run[0] - before[0]) for before, run in pairwise(runs)
    ]
    total_left, total_exposure = sum(left), sum(exposure)
    if total_left < 2 * MIN_DEPARTURES or total_exposure <= 0:
        return None
    best: _Split | None = None
    after_left, after_exposure = 0, 0.0
    for at in range(len(left) - 1, 0, -1):  # the split is before runs[at + 1]
        after_left += left[at]
        after_exposure += exposure[at]
        if runs[-1][0] - runs[at][0] < MIN_CHANGE_SECONDS:
            continue
        if total_left - after_left < MIN_DEPARTURES:
            break
        share = after_exposure / total_exposure
        sd = math.sqrt(total_left * share * (1 - share))
        if sd <= 0:
            continue
        z = abs(after_left - total_left * share) / sd
        if best is None or z > best.z:
            best = _Split(at=at, z=z, rate=after_left / after_exposure if after_exposure else 0.0)
    return best


@dataclass(frozen=True)
class _ShopPace:
    lam: float
    rel_err: float


def _shop_pace(
    departures: Sequence[Sequence[float]], *, capacity: int, now: float
) -> _ShopPace | None:
    """``capacity / W`` by Little's law since the shop last changed (or over the last minute),
    leaning to the last 15 s when they disagree; None before ``MIN_DEPARTURES`` departures."""
    runs = sorted(
        (d for d in departures if now - PACE_WINDOW_SECONDS <= d[0] <= now), key=lambda d: d[0]
    )
    measured = _stretch(runs, now=now, capacity=capacity)
    if measured is None:
        return None
    # The runs of this second so far have counted only part of its departures.
    split = _likeliest_change([r for r in runs if r[0] < math.floor(now)], capacity=capacity)
    changed = split is not None and split.z >= CHANGE_Z
    since = runs[split.at :] if split is not None and changed else runs
    long = _stretch(since, now=now, capacity=capacity)
    least = MIN_DEPARTURES // 2 if changed else MIN_DEPARTURES
    if long is None or long.left < least or not long.exposure:
        return None
    short = _stretch(
        [r for r in since if r[0] >= now - SHORT_WINDOW_SECONDS], now=now, capacity=capacity
    )
    lam = capacity * long.per_inside_second
    events = long.left
    drift = 0.0
    if short is not None and short.left >= MIN_DEPARTURES // 2 and short.span < long.span:
        short_lam = capacity * short.per_inside_second
        drift = abs(short_lam - lam) / lam
        # Beyond the short window's own noise the shop has changed: from one standard error
        # of it to two, lean from the minute to the last 15 s. A blend, not a switch, so that
        # an estimate does not flip between the two with every departure.
        lean = min(1.0, max(0.0, drift * math.sqrt(short.left) - 1))
        lam = lean * short_lam + (1 - lean) * lam
        events = round(lean * short.left + (1 - lean) * events)
    if split is not None and not changed and split.rate:
        # A change not yet sure: the range reaches toward it, as far as the evidence goes.
        suspect = abs(split.rate / long.per_inside_second - 1)
        drift = max(drift, suspect * split.z / CHANGE_Z)
    young = YOUNG_ERROR * max(0.0, 1 - measured.span / PACE_WINDOW_SECONDS)
    rel_err = math.sqrt(1 / events + MODEL_ERROR**2 + drift**2 + young**2)
    return _ShopPace(lam=lam, rel_err=rel_err)


def settings_throughput(
    *, rate_per_minute: int, capacity: int, session_seconds: int
) -> Throughput | None:
    """What the settings alone say, before anything is measured: the rate when the capacity
    cannot bind (exact); otherwise only a bound (``ranged``), the configured pace."""
    if rate_per_minute and not capacity_may_bind(
        rate_per_minute=rate_per_minute, capacity=capacity, session_seconds=session_seconds
    ):
        rate = rate_per_minute / 60.0
        return Throughput(lam=rate, scv=1.0, measured=False, rel_err=MODEL_ERROR)
    prior = configured_pace(
        rate_per_minute=rate_per_minute, capacity=capacity, session_seconds=session_seconds
    )
    if prior is None:
        return None
    return Throughput(lam=prior, scv=1.0, measured=False, ranged=True)


def _with_tiers(
    throughput: Throughput | None,
    tier_admissions: Mapping[int, Sequence[Sequence[int]]],
    groups: Sequence[Sequence[int]],
    end: int,
) -> Throughput | None:
    if throughput is None or throughput.ranged or len(groups) < 2:
        return throughput
    tier_lams = []
    ahead = 0.0
    for group in groups:
        if ahead > 0:
            lam = max(throughput.lam * MIN_TIER_SHARE, throughput.lam - ahead)
            tier_lams += [(tier_id, lam) for tier_id in group]
        for tier_id in group:
            rate = _per_second(
                tier_admissions.get(tier_id, ()), end=end, window=PACE_WINDOW_SECONDS
            )
            ahead += rate.per_second if rate is not None else 0.0
    return replace(throughput, tier_lams=tuple(tier_lams))


def measure_throughput(
    admissions: Sequence[Sequence[int]],
    *,
    departures: Sequence[Sequence[int]] = (),
    tier_admissions: Mapping[int, Sequence[Sequence[int]]] | None = None,
    groups: Sequence[Sequence[int]] = (),
    now: datetime,
    rate_per_minute: int,
    capacity: int,
    session_seconds: int,
    prequeue_let_go_at: datetime | None = None,
) -> Throughput | None:
    """The pace from the admission runs' records: ``admissions`` as ``(unix second, count)``,
    ``departures`` as ``(unix second, left since the previous run, inside after the run)``,
    ``tier_admissions`` the admissions per tier id, and the tiers' service ``groups`` (ids,
    in service order: each strict tier alone, a weighted group together);
    ``prequeue_let_go_at`` the start of a sale that had a pre-queue."""
    end = int(now.timestamp())
    settling = prequeue_let_go_at is not None and (
        (now - prequeue_let_go_at).total_seconds() < SETTLING_SECONDS
    )
    throughput = _measure_pace(
        admissions,
        departures=departures,
        now=now.timestamp(),
        rate_per_minute=rate_per_minute,
        capacity=capacity,
        session_seconds=session_seconds,
        settling=settling,
    )
    return _with_tiers(throughput, tier_admissions or {}, groups, end)


def _measure_pace(
    admissions: Sequence[Sequence[int]],
    *,
    departures: Sequence[Sequence[int]],
    now: float,
    rate_per_minute: int,
    capacity: int,
    session_seconds: int,
    settling: bool = False,
) -> Throughput | None:
    admitted = _per_second(admissions, end=int(now), window=WINDOW_SECONDS)
    scv = admitted.scv if admitted is not None and admitted.events >= MIN_SAMPLES else 1.0
    rate = rate_per_minute / 60.0 if rate_per_minute else 0.0
    if capacity_may_bind(
        rate_per_minute=rate_per_minute, capacity=capacity, session_seconds=session_seconds
    ):
        shop = None if settling else _shop_pace(departures, capacity=capacity, now=now)
        if shop is None:
            return settings_throughput(
                rate_per_minute=rate_per_minute, capacity=capacity, session_seconds=session_seconds
            )
        if rate and rate < shop.lam:
            return Throughput(lam=rate, scv=scv, measured=True, rel_err=MODEL_ERROR)
        return Throughput(lam=shop.lam, scv=scv, measured=True, rel_err=shop.rel_err)
    if rate:
        return Throughput(lam=rate, scv=scv, measured=True, rel_err=MODEL_ERROR)
    if admitted is not None and admitted.events >= MIN_SAMPLES:
        rel_err = math.sqrt(1 / admitted.events + MODEL_ERROR**2)
        return Throughput(lam=admitted.per_second, scv=scv, measured=True, rel_err=rel_err)
    return None


def estimate_wait(
    position: int, throughput: Throughput | None, tier_id: int | None = None
) -> Eta | None:
    """Seconds until a fan of ``tier_id`` at ``position`` (1 = next) is admitted."""
    if throughput is None or throughput.ranged or throughput.lam <= 0 or position < 1:
        return None
    lam = throughput.pace_for(tier_id)
    mean = position / lam
    sd = math.sqrt(
        position * throughput.scv / lam**2 + (mean * throughput.rel_err) ** 2 + TICK_SD**2
    )
    return Eta(p10=max(0.0, mean - Z90 * sd), p50=mean, p90=mean + Z90 * sd)


# Seconds a session may run past its end before its place is freed (the expiry runs at the
# next tick) and the freed place is filled (the admission run at that tick): per session.
SESSION_TURNOVER_SECONDS = 2.0


def wait_bound(
    position: int, *, rate_per_minute: int, capacity: int, session_seconds: int
) -> float | None:
    """The longest a fan at ``position`` (1 = next) can wait while the pace of a shop whose
    capacity may bind is still being measured: a bound, not a guess. The shop's places free
    within a session (every pass runs out by then), so the fans ahead go in by waves of
    ``capacity``, each wave at most a session (and its turnover) plus, with a rate, the time
    the rate takes to let a whole wave in. None where the settings bound nothing: a capacity
    that cannot bind (the rate is then the pace, quoted as an estimate) or no session."""
    if (
        position < 1
        or not session_seconds
        or not capacity_may_bind(
            rate_per_minute=rate_per_minute, capacity=capacity, session_seconds=session_seconds
        )
    ):
        return None
    wave = session_seconds + SESSION_TURNOVER_SECONDS
    if rate_per_minute:
        wave += capacity / (rate_per_minute / 60.0)
    return math.ceil(position / capacity) * wave
