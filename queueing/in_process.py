"""What one web or worker process keeps for itself, and how its threads use the database.

- ``ProcessCache``: values this process read recently (an on-sale's layout, its pace, the
  line's snapshot, the pass keys...), each with the moment it was kept, a time to live, an
  optional bound on how many are kept (least recently used out first) and one lock. Every
  cache is listed in one registry, so that tests forget them all with ``clear_all()``.
- ``PerEventLoop``: one value per running event loop (a future, a task, a connection
  belongs to the loop that made it), made on first use and forgotten with the loop.
- ``closes_old_connections``: a function handed to a thread (from the event loop, or a
  background read) runs as Django runs a request, closing a connection that broke or aged
  out before and after, so that a PostgreSQL restart is not kept in that thread.

Kept at the package's root, outside the rooms: every room may use it, and it uses none.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, ParamSpec, TypeVar

from django.db import close_old_connections

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

_CACHES: weakref.WeakSet[ProcessCache[object, object]] = weakref.WeakSet()


class ProcessCache(Generic[K, V]):
    """Values kept in this process, each fresh for ``seconds`` after it was kept (a number,
    or a function read at every look, for a setting tests change). ``max_entries`` bounds
    how many are kept, least recently used out first; ``seconds`` None keeps them until
    then. Thread-safe: ``lock`` also serves callers that read and write as one step."""

    def __init__(
        self,
        name: str,
        *,
        seconds: float | Callable[[], float] | None = None,
        max_entries: int | None = None,
    ) -> None:
        self.name = name
        self._seconds = seconds
        self._max_entries = max_entries
        self._kept: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self.lock = threading.RLock()
        _CACHES.add(self)  # type: ignore[arg-type]

    def seconds(self) -> float | None:
        return self._seconds() if callable(self._seconds) else self._seconds

    def kept(self, key: K) -> tuple[V, float] | None:
        """The value kept for ``key`` and its age in seconds, fresh or not (None: none)."""
        if self._max_entries is None:
            # One dict read, atomic as it is: the polls' hot path takes no lock for it.
            found = self._kept.get(key)
        else:
            with self.lock:
                found = self._kept.get(key)
                if found is not None:
                    self._kept.move_to_end(key)
        if found is None:
            return None
        kept_at, value = found
        return value, time.monotonic() - kept_at

    def fresh(self, key: K) -> tuple[bool, V | None]:
        """Whether a fresh value is kept for ``key``, and that value (a value may be None)."""
        found = self.kept(key)
        if found is None:
            return False, None
        value, age = found
        seconds = self.seconds()
        if seconds is not None and age >= seconds:
            return False, None
        return True, value

    def put(self, key: K, value: V, *, kept_at: float | None = None) -> V:
        """Keep ``value`` for ``key`` as of ``kept_at`` (``time.monotonic()``; now if None)."""
        at = time.monotonic() if kept_at is None else kept_at
        with self.lock:
            self._kept[key] = (at, value)
            if self._max_entries is not None:
                self._kept.move_to_end(key)
                while len(self._kept) > self._max_entries:
                    self._kept.popitem(last=False)
        return value

    def pop(self, key: K) -> None:
        with self.lock:
            self._kept.pop(key, None)

    def keys(self) -> list[K]:
        with self.lock:
            return list(self._kept)

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        with self.lock:
            self._kept.clear()


def clear_all() -> None:
    """Forget everything every cache of this process keeps (tests, between cases)."""
    for cache in list(_CACHES):
        cache.clear()


class PerEventLoop(Generic[V]):
    """One ``V`` per running event loop, made by ``make`` on first use."""

    def __init__(self, make: Callable[[], V]) -> None:
        self._make = make
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, V] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> V:
        loop = asyncio.get_running_loop()
        found = self._by_loop.get(loop)
        if found is None:
            found = self._by_loop[loop] = self._make()
        return found


def closes_old_connections(func: Callable[P, R]) -> Callable[P, R]:
    """Run ``func`` (in a thread of its own) as Django runs a request: a connection broken by
    a restart, or past its age, is closed before and after, never kept for the next call."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    return wrapper
