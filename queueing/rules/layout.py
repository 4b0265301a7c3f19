"""The shape of an event's line (its tiers in service order, its configured pace), where a
fan stands in it, and how soon their page asks again. Pure: no I/O."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from queueing.rules.eta import Throughput


@dataclass(frozen=True)
class TierLayout:
    id: int
    priority: int
    share: int


@dataclass(frozen=True)
class EventLayout:
    event_id: int
    slug: str
    heartbeat_seconds: int
    # Admissions per second the event is configured for (None: no pace to go by).
    pace: float | None
    # In service order: (priority, id).
    tiers: tuple[TierLayout, ...]
    # What the settings alone say of the pace, until the admission runs have measured it.
    settings_pace: Throughput | None = None
    # Staff's word to the line ("" = none): polls carry it, read from this cached layout, so
    # a polling page learns of a new message within the cache's life and no query is made.
    message: str = ""
    # Staff paused the on-sale: fans are told no wait (nobody knows when staff will resume),
    # known to polls within the cache's life as the message is.
    paused: bool = False
    # How long the place of a fan whose page is closed is kept after the heartbeat window
    # (queueing/line/away.py): what the page promises ("you can close this page for ...").
    away_seconds: int = 0
    # How many lanes the line is split in (queueing/rules/lanes.py): each has its own keys.
    lanes: int = 1
    # The shop (or staff) said the sale is sold out (staff/sell_out.py): polls say so, with
    # staff's word, within the cache's life as the message is.
    sold_out_at: datetime | None = None
    sold_out_message: str = ""

    def tier_index(self, tier_id: int) -> int | None:
        for index, tier in enumerate(self.tiers):
            if tier.id == tier_id:
                return index
        return None


class _HasShare(Protocol):
    @property
    def share(self) -> int: ...


T = TypeVar("T", bound=_HasShare)


def service_groups(tiers: Sequence[T]) -> list[list[T]]:
    """Tiers in service order, grouped: each strict tier alone, consecutive weighted together."""
    groups: list[list[T]] = []
    for tier in tiers:
        if tier.share and groups and groups[-1][0].share:
            groups[-1].append(tier)
        else:
            groups.append([tier])
    return groups


# ------------------------------------------------- where a fan stands in the line


def position_in_line(
    layout: EventLayout, *, tier_id: int, rank_in_tier: int, tier_counts: Sequence[int]
) -> int:
    """1-based position ("1" = next) of a waiting fan, following admission's service order.

    Everyone in the groups served before the fan's is ahead. In a strict tier, those ahead in
    the tier are. In a weighted group, for every fan ahead in the fan's own tier (weight w),
    another tier of weight v sends about v / w fans first.
    """
    counts = dict(zip((tier.id for tier in layout.tiers), tier_counts, strict=False))
    ahead = 0
    for group in service_groups(layout.tiers):
        mine = next((tier for tier in group if tier.id == tier_id), None)
        if mine is None:
            ahead += sum(counts.get(tier.id, 0) for tier in group)
            continue
        ahead += rank_in_tier
        for other in group:
            if other.id != tier_id:
                ahead += min(counts.get(other.id, 0), rank_in_tier * other.share // mine.share)
        break
    return ahead + 1


def rank_from_checkpoints(checkpoints: Sequence[tuple[int, int]], order_key: int) -> int | None:
    """The 0-based rank of ``order_key`` in a tier sketched by ascending ``(rank, order key)``
    checkpoints (a tick's, or a snapshot's): exact on a checkpoint, interpolated between two,
    None where the sketch cannot place it (before the first, past the last, or between two
    neighbouring ranks: not in this tier's line as sketched). The waiting page's rule
    (``rankIn`` in waiting.js), pinned to this one by tests/queueing/web/test_position_rule_js.py.
    """
    return _placed(checkpoints, order_key)[0]


def _placed(checkpoints: Sequence[tuple[int, int]], order_key: int) -> tuple[int | None, int]:
    """``rank_from_checkpoints``, and the index of the last checkpoint at or below the key
    (-1: none)."""
    lo = bisect.bisect_right(checkpoints, order_key, key=lambda c: c[1]) - 1
    if lo < 0:
        return None, lo
    rank_lo, key_lo = checkpoints[lo]
    if key_lo == order_key:
        return rank_lo, lo
    if lo == len(checkpoints) - 1:
        return None, lo
    rank_hi, key_hi = checkpoints[lo + 1]
    if rank_hi - rank_lo == 1:
        return None, lo
    # Rounded as Math.round does: halves up.
    fraction = (order_key - key_lo) / (key_hi - key_lo)
    guess = math.floor(rank_lo + fraction * (rank_hi - rank_lo) + 0.5)
    return min(rank_hi - 1, max(rank_lo + 1, guess)), lo


@dataclass(frozen=True)
class SketchedPosition:
    position: int
    exact: bool  # the fan's order key is a checkpoint's: its rank was counted, not guessed


def position_from_sketch(
    layout: EventLayout,
    *,
    tier_id: int,
    order_key: int,
    checkpoints: Sequence[tuple[int, int]],
    tier_counts: Sequence[int],
) -> SketchedPosition:
    """A waiting fan's position placed from a sketch of the line (its tier's checkpoints,
    every tier's count), as the waiting page places itself from a tick.

    Where the sketch cannot place the fan, the nearest rank it allows is taken: just after
    the checkpoint below its order key (behind everyone sketched, for a fan who joined after
    the sketch was taken), or first when there is none."""
    rank, below = _placed(checkpoints, order_key)
    exact = rank is not None and checkpoints[below][1] == order_key
    if rank is None:
        # Past the last checkpoint (the tier's last fan), that rank + 1 is the tier's count.
        rank = 0 if below < 0 else checkpoints[below][0] + 1
    position = position_in_line(layout, tier_id=tier_id, rank_in_tier=rank, tier_counts=tier_counts)
    return SketchedPosition(position=position, exact=exact)


# ------------------------------------------- how soon a page asks again (X-Poll-After-Seconds)

MIN_POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 30.0
# While the hot index cannot answer, every poll costs PostgreSQL a read: fans are asked to
# come back this many times later, to shed load ...
DEGRADED_FACTOR = 3.0
# ... up to this, and never past half the heartbeat: heartbeats the outage kept from being
# recorded are made good by the rebuild after it (a fresh heartbeat_seconds for everyone),
# and a fan told to wait this long is back well within that.
DEGRADED_MAX_POLL_SECONDS = 60.0


def keepalive_seconds(heartbeat_seconds: int) -> float:
    """How often a page is seen, so that a missed sighting does not leave its fan away: a
    third of the heartbeat, within 1-30 s. A far-back poll asks again this often, and a web
    process refreshes its open sockets' tickets this often (queueing/live/watchers.py)."""
    return max(MIN_POLL_SECONDS, min(MAX_POLL_SECONDS, heartbeat_seconds / 3))


def poll_after_seconds(
    *, heartbeat_seconds: int, position: int | None, degraded: bool = False
) -> float:
    """Early enough that a missed poll does not expire the ticket (``keepalive_seconds``),
    and sooner the nearer the fan is to the front, so that admission is noticed quickly;
    ``degraded`` (answered without the hot index): later, to shed load."""
    keep_alive = keepalive_seconds(heartbeat_seconds)
    after = (
        keep_alive if position is None else min(keep_alive, max(MIN_POLL_SECONDS, position / 20))
    )
    if degraded:
        longest = max(keep_alive, min(DEGRADED_MAX_POLL_SECONDS, heartbeat_seconds / 2))
        after = min(after * DEGRADED_FACTOR, longest)
    return round(after, 1)
