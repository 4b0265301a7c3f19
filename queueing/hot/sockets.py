"""The WebSockets open on each ticket, across every web process (a sorted set per ticket).

A ticket's page may be open in a few tabs or devices; hundreds of sockets on one ticket are a
client holding server memory. The newest socket wins: registering one over the cap names the
oldest, whose consumers are then told to go (queueing/live/sockets.py).
"""

from __future__ import annotations

from queueing.hot import keys
from queueing.hot.client import (
    ASYNC_REDIS_FAILURES,
    HotIndexUnavailable,
    async_client_ready,
    fails_open,
    run_script_async,
)

# Longer than any page stays open in practice; refreshed by every arrival on the ticket. A set
# left by a process that died only holds names the next arrivals push out.
SOCKETS_TTL_SECONDS = 24 * 3600


# Redis away: the socket is let in (the cap protects memory, not anybody's place).
@fails_open(
    answer_from=lambda *args, **kwargs: [],
    warning="could not count the sockets of a ticket (event, entry, channel)",
)
async def ticket_socket_claim(
    event_id: int, entry_id: int, channel: str, *, keep: int, lane: int = 0
) -> list[str]:
    """Register ``channel`` on the ticket; the channels of the oldest sockets beyond ``keep``."""
    over = await run_script_async(
        "sockets_claim",
        keys=[keys.ticket_sockets(event_id, entry_id, lane)],
        args=[channel, keep, SOCKETS_TTL_SECONDS],
    )
    return [name.decode() if isinstance(name, bytes) else str(name) for name in over]


# Redis away: the set expires; newer arrivals push a stale name out anyway.
@fails_open(None)
async def ticket_socket_release(
    event_id: int, entry_id: int, channel: str, *, lane: int = 0
) -> None:
    try:
        redis_client = await async_client_ready()
        await redis_client.zrem(keys.ticket_sockets(event_id, entry_id, lane), channel)
    except ASYNC_REDIS_FAILURES as exc:
        raise HotIndexUnavailable(str(exc)) from exc
