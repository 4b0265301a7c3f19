"""Group commit for the lean join path: one batch of joins commits in a thread of its own
while the next one gathers, in a bounded queue with a deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from queueing.in_process import closes_old_connections
from queueing.observability import untraced
from queueing.web.api_errors import (
    api_exception_response,
    unavailable_response,
)
from queueing.web.api_fan import join_batch
from queueing.web.edge_figures import join_queue_watch

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Waiting:
    """A join waiting for its batch."""

    request: HttpRequest
    slug: str
    future: asyncio.Future[HttpResponse]
    deadline: float  # in the loop's time: past it, the join is refused rather than committed
    arrived: float  # in the loop's time


class JoinBatcher:
    """Group commit: one batch of joins commits in a thread of its own while the next one
    gathers. A lone join goes at once; under load, batches grow by themselves to what
    arrived during the last commit (at most ``WR_JOIN_BATCH_MAX``). With
    ``WR_JOIN_LINGER_MS``, a batch also waits until its first join is that old (or it is
    full), for processes whose share of an on-sale's joins is too thin to fill a lane's part.

    The joins waiting for a batch are bounded (``WR_JOIN_QUEUE_MAX``; one more is refused at
    once) and each has a deadline (``WR_JOIN_QUEUE_DEADLINE_SECONDS``): a join still waiting
    when it passes is told ``503 unavailable`` and leaves the queue, so it is never committed.
    A join whose batch has started committing is answered when that batch commits. Joins
    wait in arrival order, so the expired ones are always at the head: one timer, armed for
    the head's deadline, is enough."""

    def __init__(self) -> None:
        self._pending: deque[_Waiting] = deque()
        self._draining = False
        self._drainer: asyncio.Task[None] | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._full: asyncio.Future[None] | None = None  # set when a lingering batch fills
        # One thread: batches of a process commit one after another, each under one lock
        # of the chain head, rather than contending for it (two in flight measured slower
        # on the benchmark's two cores: more lock waits and context switches).
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="join-batch")
        # Sampled for waitingroom_join_queue_depth, rather than set at every join.
        join_queue_watch(self)

    def depth(self) -> int:
        """Joins waiting for a batch now."""
        return len(self._pending)

    async def submit(self, request: HttpRequest, slug: str) -> HttpResponse:
        if len(self._pending) >= settings.WR_JOIN_QUEUE_MAX:
            return unavailable_response()  # at once: it could only wait to be refused
        loop = asyncio.get_running_loop()
        now = loop.time()
        waiting = _Waiting(
            request,
            slug,
            loop.create_future(),
            now + settings.WR_JOIN_QUEUE_DEADLINE_SECONDS,
            now,
        )
        self._pending.append(waiting)
        if len(self._pending) >= settings.WR_JOIN_BATCH_MAX and self._full is not None:
            if not self._full.done():
                self._full.set_result(None)
        self._arm_expiry(loop)
        if not self._draining:
            self._draining = True
            # Kept referenced: the loop holds only a weak reference to its tasks.
            self._drainer = loop.create_task(self._drain())
        return await waiting.future

    def _arm_expiry(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._expiry is None and self._pending:
            self._expiry = loop.call_at(self._pending[0].deadline, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        """At the head's deadline (the head may have left for a batch since)."""
        self._expiry = None
        self._refuse_expired(loop.time())
        self._arm_expiry(loop)

    def _refuse_expired(self, now: float) -> None:
        while self._pending and self._pending[0].deadline <= now:
            late = self._pending.popleft()
            if not late.future.done():
                late.future.set_result(unavailable_response())

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                await self._linger(loop)
                # What waited past its deadline was (or is now) told no: never commit it.
                self._refuse_expired(loop.time())
                size = min(settings.WR_JOIN_BATCH_MAX, len(self._pending))
                batch = [self._pending.popleft() for _ in range(size)]
                if not self._pending and self._expiry is not None:
                    self._expiry.cancel()  # nothing left to expire
                    self._expiry = None
                if batch:
                    await self._commit(loop, batch)
        finally:
            self._draining = False

    async def _linger(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the batch gather until its first join is ``WR_JOIN_LINGER_MS`` old, or until
        it is full: bigger parts per lane, each holding its lane's chain head once."""
        linger = settings.WR_JOIN_LINGER_MS / 1000
        if not linger or not self._pending:
            return
        left = self._pending[0].arrived + linger - loop.time()
        if left > 0 and len(self._pending) < settings.WR_JOIN_BATCH_MAX:
            self._full = loop.create_future()
            try:
                await asyncio.wait({self._full}, timeout=left)
            finally:
                self._full = None

    async def _commit(self, loop: asyncio.AbstractEventLoop, batch: list[_Waiting]) -> None:
        """Commit one batch and answer each of its joins, whatever happens: a join left
        without an answer would wait for ever."""
        items = [(waiting.request, waiting.slug) for waiting in batch]
        try:
            responses = await loop.run_in_executor(self._executor, _commit_batch, items)
            for waiting, response in zip(batch, responses, strict=True):
                if not waiting.future.done():
                    waiting.future.set_result(response)
        except Exception as exc:  # noqa: BLE001  (the thread itself failed, or a bug here)
            for waiting in batch:
                if not waiting.future.done():
                    waiting.future.set_exception(exc)


@closes_old_connections
def _commit_batch(items: Sequence[tuple[HttpRequest, str]]) -> list[HttpResponse]:
    """In the batch thread: like one Django request, with its connection checks around it,
    and like the lean paths, untraced."""
    try:
        with untraced():
            return join_batch(items)
    except Exception as exc:  # noqa: BLE001  every fan of the batch gets the API's answer
        # join_batch answers each fan's own failures; what reaches here failed before any
        # join of the batch committed. The middleware's mapping says what fans are told
        # (503 while PostgreSQL is unreachable, never an HTML page).
        return [api_exception_response(request, exc) for request, _ in items]
