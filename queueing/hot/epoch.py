"""The index's epoch and its race-free rebuild from PostgreSQL (tombstones, one lock per event).

Each lane of a line (queueing/rules/lanes.py) has its own epoch, judged on the node that
holds the lane: a lane's master may fail over alone. The line is whole only while every
lane's epoch is ready on its node; when any is not, the whole on-sale is rebuilt (every
lane, under the one rebuild lock on lane 0's tag), which is simpler than mending one lane
and costs what the rebuild of a line costs anyway."""

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
def epoch_states(
    event_ids: Sequence[int], *, lanes: Mapping[int, int] | None = None
) -> dict[int, IndexState]:
    """Each on-sale's index state: its worst lane's (``lanes``: an on-sale's number of
    lanes, 1 where not given)."""
    if not event_ids:
        return {}
    # One script per lane, each judged on its own node (lanes live in different cluster
    # slots, and each node has its own run id), all in one round trip.
    asked = [
        (event_id, lane) for event_id in event_ids for lane in range((lanes or {}).get(event_id, 1))
    ]
    codes = run_script_many(
        "epoch_state", [([keys.epoch(event_id, lane)], []) for event_id, lane in asked]
    )
    states: dict[int, IndexState] = {}
    for (event_id, _), code in zip(asked, codes, strict=True):
        state = _EPOCH_STATES[code]
        states[event_id] = min(states.get(event_id, state), state)
    return states


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
def mark_new_event_ready(event_id: int, *, lanes: int = 1) -> None:
    """A new event has an empty line: each lane's index is complete as it is."""
    token = secrets.token_hex(8)
    for lane in range(lanes):
        key = keys.epoch(event_id, lane)
        client().set(key, epoch_value("ready", token, key=key), nx=True)


@unavailable_on_redis_error
def request_rebuild_once(event_id: int, *, within_seconds: int) -> bool:
    """True for the first caller in ``within_seconds``: it should ask for a rebuild."""
    return bool(client().set(keys.rebuild_requested(event_id), "1", nx=True, ex=within_seconds))


@dataclass(frozen=True)
class Rebuild:
    event_id: int
    token: str
    run_ids: tuple[str, ...]  # of the node holding each lane, in lane order

    def building_value(self, lane: int) -> str:
        return f"building:{self.run_ids[lane]}:{self.token}"

    def ready_value(self, lane: int) -> str:
        return f"ready:{self.run_ids[lane]}:{self.token}"


@unavailable_on_redis_error
def rebuild_begin(
    event_id: int, *, tier_ids: Iterable[int], lock_seconds: int, lanes: int = 1
) -> Rebuild | None:
    """Take the event's rebuild lock and reset every lane's index to an empty, building
    state (one transaction per lane: each touches one lane's slot).

    From here on, new joins add themselves (the epoch exists) while the rebuild loads the
    entries PostgreSQL already had; readers treat a building index as not authoritative.
    """
    redis_client = client()
    token = secrets.token_hex(8)
    if not redis_client.set(keys.rebuild_lock(event_id), token, nx=True, ex=lock_seconds):
        return None
    tier_ids = list(tier_ids)
    handle = Rebuild(
        event_id=event_id,
        token=token,
        run_ids=tuple(server_run_id(keys.epoch(event_id, lane)) for lane in range(lanes)),
    )
    for lane in range(lanes):
        pipe = redis_client.pipeline(transaction=True)
        pipe.set(keys.epoch(event_id, lane), handle.building_value(lane))
        pipe.delete(
            keys.tombstones(event_id, lane),
            keys.heartbeats(event_id, lane),
            keys.prequeue(event_id, lane),
            *(keys.tier_queue(event_id, tier_id, lane) for tier_id in tier_ids),
        )
        pipe.execute()
    return handle


class RebuildSuperseded(Exception):
    """The epoch changed during a rebuild (Redis flushed again, or another rebuild began)."""


# Where a rebuild puts entries, by (lane, a tier's id or None for the pre-queue), with each
# list flat as ZADD takes it: order key, entry id, ...
RebuildLines = Mapping[tuple[int, int | None], Sequence[int]]


def rebuild_lines(
    entries: Iterable[IndexedEntry], *, lane: int = 0
) -> dict[tuple[int, int | None], list[int]]:
    lines: dict[tuple[int, int | None], list[int]] = {}
    for entry in entries:
        lines.setdefault((lane, entry.tier_id), []).extend((entry.order_key, entry.member))
    return lines


@unavailable_on_redis_error
def rebuild_load(handle: Rebuild, lines: RebuildLines, *, heartbeat_deadline: float) -> int:
    """Load a chunk of entries, in one round trip whatever the number of tiers and lanes."""
    event_id = handle.event_id
    calls = [
        (
            [
                keys.epoch(event_id, lane),
                keys.tombstones(event_id, lane),
                keys.heartbeats(event_id, lane),
                keys.prequeue(event_id, lane)
                if tier_id is None
                else keys.tier_queue(event_id, tier_id, lane),
            ],
            [handle.building_value(lane), repr(heartbeat_deadline), *pairs],
        )
        for (lane, tier_id), pairs in lines.items()
        if pairs
    ]
    results = run_script_many("rebuild_load", calls)
    if any(result < 0 for result in results):
        raise RebuildSuperseded(f"event {event_id}")
    return sum(results)


@unavailable_on_redis_error
def rebuild_finish(handle: Rebuild) -> bool:
    """Every lane promoted to ready (each only if its epoch is still this rebuild's); False
    when any lane's was not: the caller flags the on-sale, and the next rebuild redoes all."""
    event_id = handle.event_id
    promoted = run_script_many(
        "epoch_promote",
        [
            (
                [keys.epoch(event_id, lane), keys.tombstones(event_id, lane)],
                [handle.building_value(lane), handle.ready_value(lane)],
            )
            for lane in range(len(handle.run_ids))
        ],
    )
    run_script("release_lock", keys=[keys.rebuild_lock(event_id)], args=[handle.token])
    return all(promoted)


def rebuild_abandon(handle: Rebuild) -> None:
    try:
        run_script("release_lock", keys=[keys.rebuild_lock(handle.event_id)], args=[handle.token])
    except redis.RedisError:
        pass  # the lock expires by itself
