"""The Redis hot index: the only module that talks to Redis for the queue.

Redis holds a derived copy of each event's line (see ARCHITECTURE.md): it can be lost at any
moment and is rebuilt from PostgreSQL. Every function raises ``HotIndexUnavailable`` instead of a
Redis error, so callers can degrade to PostgreSQL.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Literal, ParamSpec, TypeVar

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django_redis import get_redis_connection
from redis.commands.core import AsyncScript, Script

from queueing import keys
from queueing.layout import EventLayout

_LUA_DIR = Path(__file__).parent / "lua"
P = ParamSpec("P")
R = TypeVar("R")


class HotIndexUnavailable(Exception):
    """Redis could not be reached or answered with an error."""


class IndexState(IntEnum):
    MISSING = 0
    BUILDING = 1
    READY = 2


@dataclass(frozen=True)
class LineCounts:
    state: IndexState
    prequeue: int
    tiers: tuple[int, ...]  # waiting fans per tier, in layout order

    @property
    def waiting(self) -> int:
        return sum(self.tiers)

    @property
    def queue_length(self) -> int:
        return self.prequeue + self.waiting


class Where(IntEnum):
    NOWHERE = 0
    TIER = 1
    PREQUEUE = 2


@dataclass(frozen=True)
class Placement:
    counts: LineCounts
    where: Where
    rank: int | None  # 0-based rank in the entry's tier queue when where is TIER
    order_key: int | None  # the entry's score where found


@dataclass(frozen=True)
class IndexedEntry:
    member: int  # entry id
    tier_id: int | None  # None: in the pre-queue
    order_key: int


def _client() -> redis.Redis:
    return get_redis_connection("default")


@functools.cache
def _script(name: str) -> Script:
    return _client().register_script((_LUA_DIR / f"{name}.lua").read_text())


# The event loop's own client, for the lean ASGI paths: one per process and event loop
# (a redis.asyncio connection belongs to the loop that opened it).
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
    weakref.WeakKeyDictionary()
)


def _async_client() -> aioredis.Redis:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        timeout = settings.CACHES["default"]["OPTIONS"]["SOCKET_TIMEOUT"]
        # Not a blocking pool: waiting for a free connection costs every call a lock; past
        # the limit a call fails (HotIndexUnavailable) and that request goes to Django.
        pool = aioredis.ConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=settings.WR_ASYNC_REDIS_MAX_CONNECTIONS,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
        client = aioredis.Redis(connection_pool=pool)
        _async_clients[loop] = client
    return client


@functools.cache
def _async_script(name: str) -> AsyncScript:
    # Each call passes its own loop's client; the one registered here only encodes the source.
    return _async_client().register_script((_LUA_DIR / f"{name}.lua").read_text())


def _run(name: str, *, keys: Sequence[str], args: Sequence[object]) -> Any:
    """Run a Lua script (EVALSHA, loading it again if Redis forgot it)."""
    return _script(name)(keys=keys, args=args, client=_client())


def _unavailable_on_redis_error(func: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except redis.RedisError as exc:
            raise HotIndexUnavailable(str(exc)) from exc

    return wrapper


def _server_run_id() -> str:
    """Changes whenever Redis restarts (even from an AOF file) or another node takes over."""
    return str(_client().info("server")["run_id"])


def _epoch_value(state: str, token: str) -> str:
    # The run id inside the epoch: an index written by another Redis run may have lost its
    # last writes (AOF fsyncs once a second; a replica lags), so it is rebuilt.
    return f"{state}:{_server_run_id()}:{token}"


def _tier_keys(layout: EventLayout) -> list[str]:
    return [keys.tier_queue(layout.event_id, tier.id) for tier in layout.tiers]


def _line_counts(state: int, raw_counts: Sequence[int]) -> LineCounts:
    if not raw_counts:
        return LineCounts(state=IndexState(state), prequeue=0, tiers=())
    return LineCounts(
        state=IndexState(state),
        prequeue=int(raw_counts[0]),
        tiers=tuple(int(c) for c in raw_counts[1:]),
    )


@dataclass(frozen=True)
class LocateRequest:
    """One entry to find (and refresh, optionally add) in an event's index."""

    member: int
    tier_id: int
    heartbeat_deadline: float | None
    add: Literal["tier", "pre"] | None = None
    order_key: int | None = None


def _locate_keys(layout: EventLayout, tier_id: int) -> list[str]:
    event_id = layout.event_id
    return [
        keys.epoch(event_id),
        keys.heartbeats(event_id),
        keys.prequeue(event_id),
        keys.tier_queue(event_id, tier_id),
        *_tier_keys(layout),
    ]


def _locate_args(request: LocateRequest) -> list[object]:
    deadline = request.heartbeat_deadline
    return [
        request.member,
        "" if deadline is None else repr(deadline),
        request.add or "",
        "" if request.order_key is None else request.order_key,
    ]


def _placement(raw: Sequence[Any]) -> Placement:
    state, where, rank, score, *raw_counts = raw
    return Placement(
        counts=_line_counts(state, raw_counts),
        where=Where(where),
        rank=int(rank) if where == Where.TIER else None,
        order_key=int(float(score)) if score else None,
    )


@_unavailable_on_redis_error
def locate(
    layout: EventLayout,
    *,
    member: int,
    tier_id: int,
    heartbeat_deadline: float | None,
    add: Literal["tier", "pre"] | None = None,
    order_key: int | None = None,
) -> Placement:
    """Find an entry in its tier queue or the pre-queue, refresh its heartbeat if found,
    optionally add it first, and count the whole line, in one round trip."""
    (placement,) = locate_many(
        layout,
        [LocateRequest(member, tier_id, heartbeat_deadline, add=add, order_key=order_key)],
    )
    return placement


@_unavailable_on_redis_error
def locate_many(layout: EventLayout, requests: Sequence[LocateRequest]) -> list[Placement]:
    """``locate`` for several entries of one event in one round trip (a batch of joins)."""
    if len(requests) == 1:
        request = requests[0]
        raw = _run("locate", keys=_locate_keys(layout, request.tier_id), args=_locate_args(request))
        return [_placement(raw)]
    script = _script("locate")
    calls = [(_locate_keys(layout, r.tier_id), _locate_args(r)) for r in requests]

    def send_all() -> list[Any]:
        # EVALSHA directly: a pipeline of Script calls asks SCRIPT EXISTS first, every time.
        pipe = _client().pipeline(transaction=False)
        for call_keys, call_args in calls:
            pipe.evalsha(script.sha, len(call_keys), *call_keys, *call_args)
        return pipe.execute()

    try:
        results = send_all()
    except redis.exceptions.NoScriptError:
        # Redis forgot its scripts (restarted): load it, then again. Adding is idempotent
        # (ZADD NX), so calls that ran before the error may safely run twice.
        script.sha = _client().script_load(script.script)
        results = send_all()
    return [_placement(raw) for raw in results]


async def locate_async(layout: EventLayout, request: LocateRequest) -> Placement:
    """``locate`` for the event loop (the lean status path in queueing/hot_paths.py)."""
    try:
        raw = await _async_script("locate")(
            keys=_locate_keys(layout, request.tier_id),
            args=_locate_args(request),
            client=_async_client(),
        )
    except redis.RedisError as exc:
        raise HotIndexUnavailable(str(exc)) from exc
    return _placement(raw)


@_unavailable_on_redis_error
def line_counts(layout: EventLayout) -> LineCounts:
    pipe = _client().pipeline(transaction=False)
    pipe.get(keys.epoch(layout.event_id))
    pipe.zcard(keys.prequeue(layout.event_id))
    for key in _tier_keys(layout):
        pipe.zcard(key)
    epoch, *raw_counts = pipe.execute()
    if epoch is None:
        return LineCounts(state=IndexState.MISSING, prequeue=0, tiers=())
    state = IndexState.BUILDING if epoch.startswith(b"building:") else IndexState.READY
    return _line_counts(state, raw_counts)


@_unavailable_on_redis_error
def remove(event_id: int, *, tier_id: int, members: Sequence[int]) -> None:
    if not members:
        return
    _run(
        "remove",
        keys=[
            keys.epoch(event_id),
            keys.tombstones(event_id),
            keys.heartbeats(event_id),
            keys.prequeue(event_id),
            keys.tier_queue(event_id, tier_id),
        ],
        args=list(members),
    )


@dataclass(frozen=True)
class TierSketch:
    tier_id: int
    count: int
    # (rank, order key) checkpoints, ascending: from them a fan who knows its order key can
    # tell its rank in the tier to within the gap between two checkpoints.
    checkpoints: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LineSketch:
    state: IndexState
    prequeue: int
    tiers: tuple[TierSketch, ...]


@_unavailable_on_redis_error
def sketch(layout: EventLayout, *, ranks: Sequence[int]) -> LineSketch:
    raw = _run(
        "sketch",
        keys=[keys.epoch(layout.event_id), keys.prequeue(layout.event_id), *_tier_keys(layout)],
        args=list(ranks),
    )
    state, prequeue, *per_tier = raw
    if state == IndexState.MISSING:
        return LineSketch(state=IndexState.MISSING, prequeue=0, tiers=())
    tiers = []
    for tier, (count, *flat) in zip(layout.tiers, per_tier, strict=True):
        pairs = tuple((int(flat[i]), int(float(flat[i + 1]))) for i in range(0, len(flat), 2))
        tiers.append(TierSketch(tier_id=tier.id, count=int(count), checkpoints=pairs))
    return LineSketch(state=IndexState(state), prequeue=int(prequeue), tiers=tuple(tiers))


@_unavailable_on_redis_error
def head_members(layout: EventLayout, *, count: int) -> list[int]:
    """The first ``count`` entries of every tier queue (where admission works)."""
    pipe = _client().pipeline(transaction=False)
    for key in _tier_keys(layout):
        pipe.zrange(key, 0, count - 1)
    return [int(member) for members in pipe.execute() for member in members]


@_unavailable_on_redis_error
def record_line_sample(event_id: int, *, minute: int, queue_length: int) -> None:
    pipe = _client().pipeline(transaction=False)
    pipe.hset(keys.line_samples(event_id), str(minute), queue_length)
    pipe.expire(keys.line_samples(event_id), 7200)
    pipe.execute()


@_unavailable_on_redis_error
def line_samples(event_id: int, minutes: Sequence[int]) -> list[int | None]:
    raw = _client().hmget(keys.line_samples(event_id), [str(m) for m in minutes])
    return [None if value is None else int(value) for value in raw]


@_unavailable_on_redis_error
def remember_tick(event_id: int, text: str) -> None:
    _client().set(keys.last_tick(event_id), text, ex=60)


@_unavailable_on_redis_error
def last_tick(event_id: int) -> str | None:
    raw = _client().get(keys.last_tick(event_id))
    return raw.decode() if raw is not None else None


async def last_tick_async(event_id: int) -> str | None:
    try:
        raw = await _async_client().get(keys.last_tick(event_id))
    except redis.RedisError as exc:
        raise HotIndexUnavailable(str(exc)) from exc
    return raw.decode() if raw is not None else None


@_unavailable_on_redis_error
def refresh_heartbeats(event_id: int, members: Sequence[int], *, deadline: float) -> None:
    """Push the deadline of fans watching over a WebSocket; XX: never revive an expired one."""
    if members:
        _client().zadd(keys.heartbeats(event_id), dict.fromkeys(members, deadline), xx=True)


@_unavailable_on_redis_error
def heartbeat_deadlines(event_id: int, members: Sequence[int]) -> dict[int, float | None]:
    """Each entry's heartbeat deadline (unix seconds), None where the index has none."""
    if not members:
        return {}
    scores = _client().zmscore(keys.heartbeats(event_id), list(members))
    return {m: (None if s is None else float(s)) for m, s in zip(members, scores, strict=True)}


@_unavailable_on_redis_error
def overdue_members(event_id: int, *, now: float, limit: int) -> list[int]:
    """Entries whose heartbeat deadline has passed, oldest first."""
    raw = _client().zrangebyscore(keys.heartbeats(event_id), "-inf", f"({now}", start=0, num=limit)
    return [int(member) for member in raw]


@_unavailable_on_redis_error
def forget_heartbeats(event_id: int, members: Sequence[int]) -> None:
    if members:
        _client().zrem(keys.heartbeats(event_id), *members)


@_unavailable_on_redis_error
def write_throughput(event_id: int, *, lam: float, scv: float, measured: bool) -> None:
    _client().hset(
        keys.stats(event_id),
        mapping={"lam": repr(lam), "scv": repr(scv), "measured": int(measured)},
    )


def _throughput(raw: dict[bytes, bytes]) -> tuple[float, float, bool] | None:
    if not raw:
        return None
    return float(raw[b"lam"]), float(raw[b"scv"]), raw[b"measured"] == b"1"


@_unavailable_on_redis_error
def read_throughput(event_id: int) -> tuple[float, float, bool] | None:
    return _throughput(_client().hgetall(keys.stats(event_id)))


async def read_throughput_async(event_id: int) -> tuple[float, float, bool] | None:
    try:
        return _throughput(await _async_client().hgetall(keys.stats(event_id)))
    except redis.RedisError as exc:
        raise HotIndexUnavailable(str(exc)) from exc


@_unavailable_on_redis_error
def epoch_states(event_ids: Sequence[int]) -> dict[int, IndexState]:
    if not event_ids:
        return {}
    # One GET per event (pipelined) rather than MGET: events live in different cluster slots.
    pipe = _client().pipeline(transaction=False)
    for event_id in event_ids:
        pipe.get(keys.epoch(event_id))
    values = pipe.execute()
    run_id = _server_run_id().encode()
    states = {}
    for event_id, value in zip(event_ids, values, strict=True):
        if value is None or value.split(b":")[1:2] != [run_id]:
            states[event_id] = IndexState.MISSING
        elif value.startswith(b"building:"):
            states[event_id] = IndexState.BUILDING
        else:
            states[event_id] = IndexState.READY
    return states


@_unavailable_on_redis_error
def rebuilds_unlocked(event_ids: Sequence[int]) -> set[int]:
    """Events whose rebuild lock nobody holds."""
    pipe = _client().pipeline(transaction=False)
    for event_id in event_ids:
        pipe.exists(keys.rebuild_lock(event_id))
    held = pipe.execute()
    return {event_id for event_id, h in zip(event_ids, held, strict=True) if not h}


@_unavailable_on_redis_error
def mark_new_event_ready(event_id: int) -> None:
    """A new event has an empty line: its index is complete as it is."""
    _client().set(keys.epoch(event_id), _epoch_value("ready", secrets.token_hex(8)), nx=True)


@_unavailable_on_redis_error
def request_rebuild_once(event_id: int, *, within_seconds: int) -> bool:
    """True for the first caller in ``within_seconds``: it should ask for a rebuild."""
    return bool(_client().set(keys.rebuild_requested(event_id), "1", nx=True, ex=within_seconds))


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


@_unavailable_on_redis_error
def rebuild_begin(event_id: int, *, tier_ids: Iterable[int], lock_seconds: int) -> Rebuild | None:
    """Take the event's rebuild lock and reset its index to an empty, building state.

    From here on, new joins add themselves (the epoch exists) while the rebuild loads the
    entries PostgreSQL already had; readers treat a building index as not authoritative.
    """
    client = _client()
    token = secrets.token_hex(8)
    if not client.set(keys.rebuild_lock(event_id), token, nx=True, ex=lock_seconds):
        return None
    handle = Rebuild(event_id=event_id, token=token, run_id=_server_run_id())
    pipe = client.pipeline(transaction=True)
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


@_unavailable_on_redis_error
def rebuild_load(
    handle: Rebuild, entries: Sequence[IndexedEntry], *, heartbeat_deadline: float
) -> int:
    event_id = handle.event_id
    by_key: dict[str, list[int]] = {}
    for entry in entries:
        key = (
            keys.prequeue(event_id)
            if entry.tier_id is None
            else keys.tier_queue(event_id, entry.tier_id)
        )
        by_key.setdefault(key, []).extend((entry.member, entry.order_key))
    loaded = 0
    for key, pairs in by_key.items():
        result = _run(
            "rebuild_load",
            keys=[
                keys.epoch(event_id),
                keys.tombstones(event_id),
                keys.heartbeats(event_id),
                key,
            ],
            args=[handle.building_value, repr(heartbeat_deadline), *pairs],
        )
        if result < 0:
            raise RebuildSuperseded(f"event {event_id}")
        loaded += result
    return loaded


@_unavailable_on_redis_error
def rebuild_finish(handle: Rebuild) -> bool:
    promoted = _run(
        "epoch_promote",
        keys=[keys.epoch(handle.event_id), keys.tombstones(handle.event_id)],
        args=[handle.building_value, handle.ready_value],
    )
    _run("release_lock", keys=[keys.rebuild_lock(handle.event_id)], args=[handle.token])
    return bool(promoted)


def rebuild_abandon(handle: Rebuild) -> None:
    try:
        _run("release_lock", keys=[keys.rebuild_lock(handle.event_id)], args=[handle.token])
    except redis.RedisError:
        pass  # the lock expires by itself


@_unavailable_on_redis_error
def rate_limit_hit(key: str, *, now: float, window: float, limit: int) -> float | None:
    """Record a call; None if allowed, else the seconds to wait."""
    allowed, retry = _run(
        "rate_limit", keys=[key], args=[repr(now), repr(window), limit, secrets.token_hex(8)]
    )
    return None if allowed else float(retry)


@_unavailable_on_redis_error
def spend_once(key: str, *, ttl_seconds: int) -> bool:
    """True the first time ``key`` is spent, False ever after (until it expires)."""
    return bool(_client().set(key, "1", nx=True, ex=ttl_seconds))


@_unavailable_on_redis_error
def ping() -> None:
    _client().ping()


@_unavailable_on_redis_error
def eviction_policy() -> str:
    return str(_client().config_get("maxmemory-policy").get("maxmemory-policy", ""))
