"""The hot index's Redis connections and scripts, and the one error every Redis failure becomes.

Redis holds a derived copy of each event's line: it can be lost at any moment and is rebuilt
from PostgreSQL. Every function of this room raises ``HotIndexUnavailable`` instead of a Redis
error, so callers can degrade to PostgreSQL.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django_redis import get_redis_connection
from redis.commands.core import AsyncScript, Script

P = ParamSpec("P")


R = TypeVar("R")


LUA_DIR = Path(__file__).parent / "lua"


class HotIndexUnavailable(Exception):
    """Redis could not be reached or answered with an error."""


def client() -> redis.Redis:
    return get_redis_connection("default")


@functools.cache
def script(name: str) -> Script:
    return client().register_script((LUA_DIR / f"{name}.lua").read_text())


# The event loop's own client, for the lean ASGI paths: one per process and event loop
# (a redis.asyncio connection belongs to the loop that opened it).
_ASYNC_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = (
    weakref.WeakKeyDictionary()
)


def async_client() -> aioredis.Redis:
    loop = asyncio.get_running_loop()
    loop_client = _ASYNC_CLIENTS.get(loop)
    if loop_client is None:
        timeout = settings.CACHES["default"]["OPTIONS"]["SOCKET_TIMEOUT"]
        # Not a blocking pool: waiting for a free connection costs every call a lock; past
        # the limit a call fails (HotIndexUnavailable) and that request goes to Django.
        pool = aioredis.ConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=settings.WR_ASYNC_REDIS_MAX_CONNECTIONS,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
        loop_client = aioredis.Redis(connection_pool=pool)
        _ASYNC_CLIENTS[loop] = loop_client
    return loop_client


@functools.cache
def async_script(name: str) -> AsyncScript:
    # Each call passes its own loop's client; the one registered here only encodes the source.
    return async_client().register_script((LUA_DIR / f"{name}.lua").read_text())


def run_script(name: str, *, keys: Sequence[str], args: Sequence[object]) -> Any:
    """Run a Lua script (EVALSHA, loading it again if Redis forgot it)."""
    return script(name)(keys=keys, args=args, client=client())


def unavailable_on_redis_error(func: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except redis.RedisError as exc:
            raise HotIndexUnavailable(str(exc)) from exc

    return wrapper


def server_run_id() -> str:
    """Changes whenever Redis restarts (even from an AOF file) or another node takes over."""
    return str(client().info("server")["run_id"])


def epoch_value(state: str, token: str) -> str:
    # The run id inside the epoch: an index written by another Redis run may have lost its
    # last writes (AOF fsyncs once a second; a replica lags), so it is rebuilt.
    return f"{state}:{server_run_id()}:{token}"
