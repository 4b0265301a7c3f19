"""The on-sale's limits on its line, judged at the door: a join is refused when the line is
at its maximum length or the wait predicted for a newcomer exceeds the on-sale's maximum
(otherwise the wait is quoted to them, and kept on the entry for the accuracy report), or
when their address already holds its cap of live places. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from queueing.rules.errors import QueueFull
from queueing.rules.eta import Eta, Throughput, estimate_wait
from queueing.rules.layout import EventLayout, position_in_line

# The longest Retry-After a refused fan is told, whatever the predicted wait (seconds).
MAX_RETRY_AFTER = 3600


def join_quote(
    layout: EventLayout,
    *,
    tier_id: int,
    waiting: bool,
    queue_length: int,
    tier_counts: Sequence[int],
    throughput: Throughput | None,
    max_queue_length: int,
    max_wait_seconds: int,
    full_retry_after: int,
    rank_in_tier: int | None = None,
) -> Eta | None:
    """The quote for a fan joining ``tier_id`` behind ``tier_counts`` (per tier, layout
    order) and ``queue_length`` in all: at the back of their tier, or, in a random line, at
    ``rank_in_tier`` (the fans of their tier whose place is lower); None in the pre-queue (no
    pace yet). Raises ``QueueFull`` when the line has no room for them (0 limits are off):
    the wait is judged at the back of the tier in either order, so that a random line is
    full for everyone at once, not for those whose place the hash put far back."""
    if max_queue_length and queue_length >= max_queue_length:
        raise QueueFull(retry_after=full_retry_after)
    if not waiting:
        return None
    back = tier_counts[layout.tier_index(tier_id) or 0]
    at_back = _quote_at(layout, tier_id, back, tier_counts, throughput)
    if max_wait_seconds and at_back is not None and at_back.p50 > max_wait_seconds:
        over = int(at_back.p50 - max_wait_seconds)
        raise QueueFull(retry_after=max(1, min(MAX_RETRY_AFTER, over)))
    if rank_in_tier is None or rank_in_tier == back:
        return at_back
    return _quote_at(layout, tier_id, rank_in_tier, tier_counts, throughput)


def _quote_at(
    layout: EventLayout,
    tier_id: int,
    rank_in_tier: int,
    tier_counts: Sequence[int],
    throughput: Throughput | None,
) -> Eta | None:
    position = position_in_line(
        layout, tier_id=tier_id, rank_in_tier=rank_in_tier, tier_counts=tier_counts
    )
    return estimate_wait(position, throughput, tier_id)


def within_address_cap(
    addresses: Sequence[str | None], *, held: Mapping[str, int], cap: int
) -> list[bool]:
    """Whether each newcomer, in join order, may join: not when their client address already
    holds ``cap`` live tickets (``held``), the newcomers let in before them included. A
    newcomer without an address is never counted; a ``cap`` of 0 is off."""
    if not cap:
        return [True] * len(addresses)
    counts = dict(held)
    allowed = []
    for address in addresses:
        ok = address is None or counts.get(address, 0) < cap
        if ok and address is not None:
            counts[address] = counts.get(address, 0) + 1
        allowed.append(ok)
    return allowed
