"""The hot index's Redis connections and scripts, and the one error every Redis failure becomes.

Redis holds a derived copy of each event's line: it can be lost at any moment and is rebuilt
from PostgreSQL. Every function of this room raises ``HotIndexUnavailable`` instead of a Redis
error, so that one place above decides what to do without it (line/reads.py for the line's
reads, line/index_sync.py for writes after a commit, line/expiry.py for heartbeats); or it is
declared ``fails_open`` and says itself what it answers while Redis is away.

Over 350 lines on purpose: the connections (sync, per event loop, a cluster's), their pools'
figures for ``/metrics`` and the one error every failure becomes are one concern; split, a
call could reach Redis without passing through that error.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django_redis import get_redis_connection
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.commands.core import AsyncScript, Script

from queueing.hot.cluster import SlotClients, async_cluster_client

P = ParamSpec("P")


R = TypeVar("R")


LUA_DIR = Path(__file__).parent / "lua"

logger = logging.getLogger(__name__)


class HotIndexUnavailable(Exception):
    """Redis could not be reached or answered with an error."""


class HotIndexBusy(HotIndexUnavailable):
    """This process had no free connection to Redis (its pool was spent): Redis itself may
    be answering other processes. Not an outage (no fail-fast), but what the call was to
    write is lost all the same (a heartbeat: ``line/expiry.py``)."""


# Until when (time.monotonic()) calls to a plain Redis fail at once: for WR_HOT_RETRY_SECONDS
# after it could not be reached. While Redis is away, every poll would otherwise open a socket
# only to be refused, or wait out the socket timeout (a stalled server, a cut network), before
# its degraded answer, and every tick would wait that out at each of its calls. Not on a
# cluster, where one node's trouble is not the others'.
_unreachable_until = 0.0


def _fail_fast() -> None:
    if _unreachable_until and time.monotonic() < _unreachable_until:
        raise HotIndexUnavailable("Redis could not be reached a moment ago")


def _unavailable(exc: BaseException) -> HotIndexUnavailable:
    """The error a Redis failure becomes; one that says Redis cannot be reached also makes
    the next calls fail at once for a while."""
    global _unreachable_until
    if isinstance(exc, redis.exceptions.MaxConnectionsError):
        return HotIndexBusy(str(exc))
    if (
        isinstance(exc, redis.ConnectionError | redis.TimeoutError | OSError)
        and not settings.REDIS_CLUSTER
    ):
        _unreachable_until = time.monotonic() + settings.WR_HOT_RETRY_SECONDS
    return HotIndexUnavailable(str(exc))


def reachability_reset() -> None:
    """Forget that Redis could not be reached (tests that bring it back at once)."""
    global _unreachable_until
    _unreachable_until = 0.0


def client() -> redis.Redis:
    return get_redis_connection("default")


@functools.cache
def script(name: str) -> Script:
    return client().register_script((LUA_DIR / f"{name}.lua").read_text())


# The event loop's own client, for the lean ASGI paths: one per process and event loop
# (a redis.asyncio connection belongs to the loop that opened it).
_ASYNC_CLIENTS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, aioredis.Redis | AsyncRedisCluster
] = weakref.WeakKeyDictionary()


def async_client() -> aioredis.Redis | AsyncRedisCluster:
    loop = asyncio.get_running_loop()
    loop_client = _ASYNC_CLIENTS.get(loop)
    if loop_client is None:
        timeout = settings.CACHES["default"]["OPTIONS"]["SOCKET_TIMEOUT"]
        if settings.REDIS_CLUSTER:
            loop_client = async_cluster_client(
                settings.REDIS_URL,
                timeout=timeout,
                max_connections=settings.WR_ASYNC_REDIS_MAX_CONNECTIONS,
            )
        else:
            # Not a blocking pool: waiting for a free connection costs every call a lock;
            # past the limit a call fails (HotIndexUnavailable) and that request goes to
            # Django.
            pool = aioredis.ConnectionPool.from_url(
                settings.REDIS_URL,
                max_connections=settings.WR_ASYNC_REDIS_MAX_CONNECTIONS,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
            )
            loop_client = aioredis.Redis(connection_pool=pool)
        _ASYNC_CLIENTS[loop] = loop_client
    return loop_client


def pool_connections() -> tuple[int, int]:
    """This process's Redis connections to the hot index, (in use, idle): the sync pool's
    (Django's cache, the tasks, the views) and the lean paths' per event loop. A cluster's
    pools are per node and not counted."""
    pools = [getattr(client(), "connection_pool", None)]
    pools += [
        getattr(loop_client, "connection_pool", None)
        for loop_client in list(_ASYNC_CLIENTS.values())
    ]
    in_use = idle = 0
    for pool in pools:
        # Read without the pool's lock: a figure a moment old is good enough for a gauge.
        in_use += len(getattr(pool, "_in_use_connections", ()))
        idle += len(getattr(pool, "_available_connections", ()))
    return in_use, idle


async def async_client_ready() -> aioredis.Redis | AsyncRedisCluster:
    """The event loop's client, initialized. A cluster client learns the slot map first:
    commands sent before it knows it are routed by no key, bounce with MOVED, and the
    reinitialization that follows drops connections other coroutines are using. For a plain
    Redis this is a flag check."""
    ready = async_client()
    await ready.initialize()
    return ready


# What an asyncio Redis call may fail with. redis-py's asyncio cluster client, when one node
# times out, drops the connections other coroutines are using, which then fail with plain
# runtime errors instead of a RedisError; each is still "Redis could not answer".
ASYNC_REDIS_FAILURES: tuple[type[BaseException], ...] = (
    redis.RedisError,
    # A slot no master is known for (during a failover): not a RedisError in redis-py.
    redis.exceptions.RedisClusterException,
    OSError,
    RuntimeError,
    AttributeError,
)


@functools.cache
def async_script(name: str) -> AsyncScript:
    # Each call passes its own loop's client; the one registered here only encodes the source.
    return async_client().register_script((LUA_DIR / f"{name}.lua").read_text())


# On a cluster, each loop client's plain clients to its masters (see SlotClients).
_SLOT_CLIENTS: weakref.WeakKeyDictionary[AsyncRedisCluster, SlotClients] = (
    weakref.WeakKeyDictionary()
)


def _slot_client(ready: aioredis.Redis | AsyncRedisCluster, key: str) -> aioredis.Redis:
    if not isinstance(ready, AsyncRedisCluster):
        return ready
    slot_clients = _SLOT_CLIENTS.get(ready)
    if slot_clients is None:
        slot_clients = SlotClients(
            ready,
            timeout=settings.CACHES["default"]["OPTIONS"]["SOCKET_TIMEOUT"],
            max_connections=settings.WR_ASYNC_REDIS_MAX_CONNECTIONS,
        )
        _SLOT_CLIENTS[ready] = slot_clients
    return slot_clients.for_key(key)


async def run_script_async(name: str, *, keys: Sequence[str], args: Sequence[object]) -> Any:
    """``run_script`` from the event loop; raises HotIndexUnavailable. On a cluster the
    script goes straight to its slot's master, and through the cluster client only when that
    fails (a failover moved the slot, the master went away): the script must be safe to run
    twice, as every script sent this way is (finding a fan, registering a socket)."""
    _fail_fast()
    lua = async_script(name)
    try:
        ready = await async_client_ready()
        try:
            direct = _slot_client(ready, keys[0])
        except (*ASYNC_REDIS_FAILURES, LookupError):
            direct = ready  # no master known for the slot: the cluster client looks again
        try:
            return await lua(keys=keys, args=args, client=direct)
        except ASYNC_REDIS_FAILURES:
            if direct is ready:
                raise
            return await lua(keys=keys, args=args, client=ready)
    except ASYNC_REDIS_FAILURES as exc:
        raise _unavailable(exc) from exc


def run_script(name: str, *, keys: Sequence[str], args: Sequence[object]) -> Any:
    """Run a Lua script (EVALSHA, loading it again if Redis forgot it)."""
    return script(name)(keys=keys, args=args, client=client())


def unavailable_on_redis_error(func: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        _fail_fast()
        try:
            return func(*args, **kwargs)
        # A cluster client that cannot be made (no seed answers) fails with an error that is
        # not a RedisError.
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            raise _unavailable(exc) from exc

    return wrapper


def answered(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> tuple[bool, R | None]:
    """``call`` of this room: whether Redis answered it, and what it answered (None when it
    did not). The seams above (line/reads.py, line/index_sync.py, line/expiry.py) decide what
    a call Redis did not answer means; they ask here rather than catch the failure each."""
    try:
        return True, call(*args, **kwargs)
    except HotIndexUnavailable:
        return False, None


async def answered_async(
    call: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs
) -> tuple[bool, R | None]:
    """``answered`` from the event loop."""
    try:
        return True, await call(*args, **kwargs)
    except HotIndexUnavailable:
        return False, None


def fails_open(
    answer: Any = None,
    *,
    answer_from: Callable[..., Any] | None = None,
    warning: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Declares, where a call to Redis is defined, what it answers while Redis cannot: the
    room's own checks (join limits, proof-of-work reuse, socket caps, tick claims) are off
    for an outage rather than refusing fans or stopping the beat for it. The call answers
    ``answer``, or what ``answer_from`` makes of its arguments; ``warning`` is logged (with
    them) when it does. The one place these calls' ``HotIndexUnavailable`` is caught."""

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        def stand_in(exc: HotIndexUnavailable, args: Any, kwargs: Any) -> Any:
            if warning is not None:
                logger.warning("%s (%s): %s", warning, ", ".join(map(str, args)), exc)
            return answer_from(*args, **kwargs) if answer_from is not None else answer

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def wrapper_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await func(*args, **kwargs)
                except HotIndexUnavailable as exc:
                    return stand_in(exc, args, kwargs)

            return wrapper_async  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return func(*args, **kwargs)
            except HotIndexUnavailable as exc:
                return stand_in(exc, args, kwargs)  # type: ignore[no-any-return]

        return wrapper

    return decorate


def run_script_many(
    name: str, calls: Sequence[tuple[Sequence[str], Sequence[object]]]
) -> list[Any]:
    """Run a Lua script once per ``(keys, args)`` in one round trip (one pipeline; on a
    cluster, one per node). The calls must be safe to repeat: if Redis forgot its scripts
    (a restart, a replica that took over), the script is loaded and they all run again."""
    lua = script(name)

    def send_all() -> list[Any]:
        # EVALSHA directly: a pipeline of Script calls asks SCRIPT EXISTS first, every time.
        pipe = client().pipeline(transaction=False)
        for call_keys, call_args in calls:
            # execute_command: a cluster pipeline refuses its evalsha method, not the command.
            pipe.execute_command("EVALSHA", lua.sha, len(call_keys), *call_keys, *call_args)
        return pipe.execute()

    try:
        return send_all()
    except redis.exceptions.NoScriptError:
        lua.sha = client().script_load(lua.script)
        return send_all()


def server_run_id(key: str) -> str:
    """The run id of the Redis that holds ``key`` (on a cluster, its slot's master). It
    changes whenever that Redis restarts (even from an AOF file) or a replica takes over."""
    return str(run_script("run_id", keys=[key], args=[]), "ascii")


def epoch_value(state: str, token: str, *, key: str) -> str:
    # The run id inside the epoch: an index written by another Redis run may have lost its
    # last writes (AOF fsyncs once a second; a replica lags), so it is rebuilt.
    return f"{state}:{server_run_id(key)}:{token}"


# ------------------------------------------- is Redis there, and safe for the index?


@unavailable_on_redis_error
def ping() -> None:
    client().ping()


@unavailable_on_redis_error
def eviction_policies() -> dict[str, str]:
    """Each Redis node's ``maxmemory-policy``, by node. On a cluster every node is asked,
    replicas too (one of them is the master after a failover); one node's answer is not
    the others'."""
    redis_client = client()
    if not isinstance(redis_client, RedisCluster):
        return {"redis": _policy(redis_client)}
    # CLUSTER NODES, not the client's slot map: the map may list masters only.
    policies = {}
    for address in redis_client.cluster_nodes():
        # "host:port", an IPv6 host in brackets: the port is after the last colon.
        host, _, port = address.rpartition(":")
        with redis.Redis(host=host.strip("[]"), port=int(port), socket_timeout=2) as node:
            policies[address] = _policy(node)
    return policies


def _policy(redis_client: redis.Redis) -> str:
    return str(redis_client.config_get("maxmemory-policy").get("maxmemory-policy", ""))
