"""An archived on-sale's keys dropped from Redis: every key under its hash tags (the line,
heartbeats, pace, ticks, sockets, join views, wrong-code budgets, mail sign-ups and the rest),
whatever wrote them, so that nothing of it lingers until a TTL that some keys do not have."""

from __future__ import annotations

from queueing.hot import keys
from queueing.hot.client import client, unavailable_on_redis_error

# Keys unlinked per command: all of one on-sale's share a hash slot, so one UNLINK may take
# many, and a few hundred keep each command short.
_UNLINK_BATCH = 500


@unavailable_on_redis_error
def event_keys_forget(event_id: int, *, lanes: int) -> int:
    """Unlink every key of the on-sale (each lane's tag); how many there were. SCAN walks the
    keyspace a page at a time (on a cluster, every node's), so Redis is never blocked."""
    redis = client()
    dropped = 0
    for pattern in keys.event_patterns(event_id, lanes):
        names: list[bytes] = []
        for name in redis.scan_iter(match=pattern, count=1000):
            names.append(name)
            if len(names) >= _UNLINK_BATCH:
                dropped += int(redis.unlink(*names))
                names = []
        if names:
            dropped += int(redis.unlink(*names))
    return dropped
