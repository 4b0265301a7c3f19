"""How soon a client should ask again: ``X-Poll-After-Seconds``. Pure: no I/O."""

from __future__ import annotations

MIN_POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 30.0
# While the hot index cannot answer, every poll costs PostgreSQL a read: fans are asked to
# come back this many times later, to shed load ...
DEGRADED_FACTOR = 3.0
# ... up to this, and never past half the heartbeat: heartbeats the outage kept from being
# recorded are made good by the rebuild after it (a fresh heartbeat_seconds for everyone),
# and a fan told to wait this long is back well within that.
DEGRADED_MAX_POLL_SECONDS = 60.0


def poll_after_seconds(
    *, heartbeat_seconds: int, position: int | None, degraded: bool = False
) -> float:
    """Early enough that a missed poll does not expire the ticket (a third of the heartbeat),
    and sooner the nearer the fan is to the front, so that admission is noticed quickly;
    ``degraded`` (answered without the hot index): later, to shed load."""
    keep_alive = max(MIN_POLL_SECONDS, min(MAX_POLL_SECONDS, heartbeat_seconds / 3))
    after = (
        keep_alive if position is None else min(keep_alive, max(MIN_POLL_SECONDS, position / 20))
    )
    if degraded:
        longest = max(keep_alive, min(DEGRADED_MAX_POLL_SECONDS, heartbeat_seconds / 2))
        after = min(after * DEGRADED_FACTOR, longest)
    return round(after, 1)
