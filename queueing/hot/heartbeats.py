"""Heartbeat deadlines of waiting fans (a sorted set per event, scored by unix seconds)."""

from __future__ import annotations

from collections.abc import Sequence

from queueing.hot import keys
from queueing.hot.client import client, unavailable_on_redis_error


@unavailable_on_redis_error
def refresh_heartbeats(event_id: int, members: Sequence[int], *, deadline: float) -> None:
    """Push the deadline of fans watching over a WebSocket; XX: never revive an expired one."""
    if members:
        client().zadd(keys.heartbeats(event_id), dict.fromkeys(members, deadline), xx=True)


@unavailable_on_redis_error
def heartbeat_deadlines(event_id: int, members: Sequence[int]) -> dict[int, float | None]:
    """Each entry's heartbeat deadline (unix seconds), None where the index has none."""
    if not members:
        return {}
    scores = client().zmscore(keys.heartbeats(event_id), list(members))
    return {m: (None if s is None else float(s)) for m, s in zip(members, scores, strict=True)}


@unavailable_on_redis_error
def overdue_members(event_id: int, *, now: float, limit: int) -> list[int]:
    """Entries whose heartbeat deadline has passed, oldest first."""
    raw = client().zrangebyscore(keys.heartbeats(event_id), "-inf", f"({now}", start=0, num=limit)
    return [int(member) for member in raw]


@unavailable_on_redis_error
def forget_heartbeats(event_id: int, members: Sequence[int]) -> None:
    if members:
        client().zrem(keys.heartbeats(event_id), *members)
