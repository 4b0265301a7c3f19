"""The index's epoch and its race-free rebuild from PostgreSQL (tombstones, one lock per event)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import redis

from queueing.hot import keys
from queueing.hot.client import (
    client,
    epoch_value,
    run_script,
    run_script_many,
    server_run_id,
    unavailable_on_redis_error,
)
from queueing.hot.line_index import IndexState


@dataclass(frozen=True)
class IndexedEntry:
    member: int  # entry id
    tier_id: int | None  # None: in the pre-queue
    order_key: int


@unavailable_on_redis_error
def epoch_states(event_ids: Sequence[int]) -> dict[int, IndexState]:
    if not event_ids:
        return {}
    # One script per event, each judged on its own node (events live in different cluster
    # slots, and each node has its own run id), all in one round trip.
    codes = run_script_many("epoch_state", [([keys.epoch(event_id)], []) for event_id in event_ids])
    return {event_id: _EPOCH_STATES[code] for event_id, code in zip(event_ids, codes, strict=True)}


_EPOCH_STATES = {0: IndexState.MISSING, 1: IndexState.BUILDING, 2: IndexState.READY}


@unavailable_on_redis_error
def rebuilds_unlocked(event_ids: Sequence[int]) -> set[int]:
    """Events whose rebuild lock nobody holds."""
    pipe = client().pipeline(transaction=False)
    for event_id in event_ids:
        pipe.exists(keys.rebuild_lock(event_id))
    held = pipe.execute()
    return {event_id for event_id, h in zip(event_ids, held, strict=True) if not h}


@unavailable_on_redis_error
def mark_new_event_ready(event_id: int) -> None:
    """A new event has an empty line: its index is complete as it is."""
    key = keys.epoch(event_id)
    client().set(key, epoch_value("ready", secrets.token_hex(8), key=key), nx=True)


@unavailable_on_redis_error
def request_rebuild_once(event_id: int, *, within_seconds: int) -> bool:
    """True for the first caller in ``within_seconds``: it should ask for a rebuild."""
    return bool(client().set(keys.rebuild_requested(event_id), "1", nx=True, ex=within_seconds))


@dataclass(frozen=True)
class Rebuild:
    event_id: int
    token: str
    run_id: str

    @property
    def building_value(self) -> str:
        return f"building:{self.run_id}:{self.token}"

    @property
    def ready_value(self) -> str:
        return f"ready:{self.run_id}:{self.token}"


@unavailable_on_redis_error
def rebuild_begin(event_id: int, *, tier_ids: Iterable[int], lock_seconds: int) -> Rebuild | None:
    """Take the event's rebuild lock and reset its index to an empty, building state.

    From here on, new joins add themselves (the epoch exists) while the rebuild loads the
    entries PostgreSQL already had; readers treat a building index as not authoritative.
    """
    redis_client = client()
    token = secrets.token_hex(8)
    if not redis_client.set(keys.rebuild_lock(event_id), token, nx=True, ex=lock_seconds):
        return None
    handle = Rebuild(event_id=event_id, token=token, run_id=server_run_id(keys.epoch(event_id)))
    pipe = redis_client.pipeline(transaction=True)
    pipe.set(keys.epoch(event_id), handle.building_value)
    pipe.delete(
        keys.tombstones(event_id),
        keys.heartbeats(event_id),
        keys.prequeue(event_id),
        *(keys.tier_queue(event_id, tier_id) for tier_id in tier_ids),
    )
    pipe.execute()
    return handle


class RebuildSuperseded(Exception):
    """The epoch changed during a rebuild (Redis flushed again, or another rebuild began)."""


# Where a rebuild puts entries, with each list flat as ZADD takes it: order key, entry id, ...
RebuildLines = Mapping[int | None, Sequence[int]]  # a tier's id, or None for the pre-queue


def rebuild_lines(entries: Iterable[IndexedEntry]) -> dict[int | None, list[int]]:
    lines: dict[int | None, list[int]] = {}
    for entry in entries:
        lines.setdefault(entry.tier_id, []).extend((entry.order_key, entry.member))
    return lines


@unavailable_on_redis_error
def rebuild_load(handle: Rebuild, lines: RebuildLines, *, heartbeat_deadline: float) -> int:
    """Load a chunk of entries, in one round trip whatever the number of tiers."""
    event_id = handle.event_id
    calls = [
        (
            [
                keys.epoch(event_id),
                keys.tombstones(event_id),
                keys.heartbeats(event_id),
                keys.prequeue(event_id) if tier_id is None else keys.tier_queue(event_id, tier_id),
            ],
            [handle.building_value, repr(heartbeat_deadline), *pairs],
        )
        for tier_id, pairs in lines.items()
        if pairs
    ]
    results = run_script_many("rebuild_load", calls)
    if any(result < 0 for result in results):
        raise RebuildSuperseded(f"event {event_id}")
    return sum(results)


@unavailable_on_redis_error
def rebuild_finish(handle: Rebuild) -> bool:
    promoted = run_script(
        "epoch_promote",
        keys=[keys.epoch(handle.event_id), keys.tombstones(handle.event_id)],
        args=[handle.building_value, handle.ready_value],
    )
    run_script("release_lock", keys=[keys.rebuild_lock(handle.event_id)], args=[handle.token])
    return bool(promoted)


def rebuild_abandon(handle: Rebuild) -> None:
    try:
        run_script("release_lock", keys=[keys.rebuild_lock(handle.event_id)], args=[handle.token])
    except redis.RedisError:
        pass  # the lock expires by itself
