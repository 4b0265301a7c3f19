"""How soon a client should ask again: ``X-Poll-After-Seconds``. Pure: no I/O."""

from __future__ import annotations

MIN_POLL_SECONDS = 1.0
MAX_POLL_SECONDS = 30.0


def poll_after_seconds(*, heartbeat_seconds: int, position: int | None) -> float:
    """Early enough that a missed poll does not expire the ticket (a third of the heartbeat),
    and sooner the nearer the fan is to the front, so that admission is noticed quickly."""
    keep_alive = max(MIN_POLL_SECONDS, min(MAX_POLL_SECONDS, heartbeat_seconds / 3))
    if position is None:
        return round(keep_alive, 1)
    nearness = max(MIN_POLL_SECONDS, position / 20)
    return round(min(keep_alive, nearness), 1)
