"""Whether heartbeats are being recorded: nobody loses their place to a Redis outage.

While Redis is away, polls and sockets cannot push anyone's heartbeat deadline, and after it
comes back with its data (a network partition, a paused server, a restart from its snapshot),
every deadline that fell in the outage would look missed. So the room's beat marks each second
that it reaches Redis (one key for the whole room, not per on-sale); a gap longer than
``GAP_SECONDS`` starts a new "recorded since", and expiry waits until fans have had a whole
``heartbeat_seconds`` after it to be seen (``line/expiry.py``, the admission run's check).
A Redis that comes back empty needs none of this: the rebuild grants everyone a grace period.
The room's view is the beat's: a web process cut off from a Redis the beat still reaches is
not seen (its fans' sockets and polls fail over to the others behind the load balancer).
"""

from __future__ import annotations

from queueing.hot import keys
from queueing.hot.client import client, script, unavailable_on_redis_error

# Two missed beats: longer than a late one, shorter than any heartbeat window worth having.
GAP_SECONDS = 3.0


@unavailable_on_redis_error
def beat_mark(now: float) -> float:
    """The beat reached Redis at ``now``: returns since when heartbeats have been recorded."""
    since = script("heartbeat_clock")(
        keys=[keys.room_beat_seen(), keys.heartbeats_since()], args=[repr(now), GAP_SECONDS]
    )
    return float(since)


@unavailable_on_redis_error
def recorded_since() -> float | None:
    raw = client().get(keys.heartbeats_since())
    return float(raw) if raw is not None else None


def expiry_waits(*, now: float, heartbeat_seconds: int) -> bool:
    """Whether fans must still be given time to be seen before anyone expires for silence:
    heartbeats have been recorded again for less than a whole window. Unknown (Redis away)
    counts as waiting; never marked (no beat has run yet) does not."""
    since = recorded_since()
    return since is not None and now < since + heartbeat_seconds
