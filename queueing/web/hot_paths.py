"""The lean ASGI paths for the two requests a sale start is made of: ticket status and join.

Django's ASGI handler costs far more per request than the work behind these two (see the
measured limits in ARCHITECTURE.md), so they are answered here, in front of Django, by the
same functions the Django views call:

- ``GET /api/v1/tickets/{ticket}``: while the fan is in line in the hot index, the answer is
  one async Lua call plus the pure view of ``queueing.services.hot_ticket_view``. Anything
  else (a bad ticket, an admitted fan, an index being rebuilt, Redis down) goes to Django.
- ``POST /api/v1/events/{slug}/join``: each request becomes a Django request and is checked
  by ``api_fan.join_prepare``; the joins that arrive while one batch commits form the next
  batch (``api_fan.join_batch``, one transaction), committed in a thread of its own.

Requests these paths are not sure about (a Host Django would refuse, plain HTTP where HTTPS
is required, a logged-in fan whose identity is their account) go to Django untouched.
"""

from __future__ import annotations

import asyncio
import functools
import io
import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.test.signals import setting_changed

from config.api_errors import error_response
from config.metrics import JOIN_SECONDS, STATUS_SECONDS
from config.middleware import api_exception_response, hot_path_headers
from queueing.line.status import hot_ticket_poll
from queueing.rules.tickets import InvalidTicket, ticket_read
from queueing.web.api_fan import join_batch, ticket_status_payload
from queueing.web.http import body_too_large

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_STATUS_PATH = re.compile(r"^/api/v1/tickets/([^/]+)$")
_JOIN_PATH = re.compile(r"^/api/v1/events/([^/]+)/join$")


class HotPaths:
    """ASGI app: the two hot requests here, everything else (and every request these paths
    are not sure about) to ``inner``, the project's Django and Channels application."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner
        self.joins = JoinBatcher()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            if method == "GET" and (match := _STATUS_PATH.match(path)):
                if await self._status(scope, send, match[1]):
                    return
            elif method == "POST" and (match := _JOIN_PATH.match(path)):
                if await self._join(scope, receive, send, match[1]):
                    return
        await self.inner(scope, receive, send)

    async def _status(self, scope: Scope, send: Send, ticket: str) -> bool:
        """Answer a fan in line from the hot index; False: leave it to Django."""
        started = time.perf_counter()
        secure = _served_securely(scope)
        if secure is None:
            return False
        try:
            ref = ticket_read(ticket)
        except InvalidTicket:
            return False
        view = await hot_ticket_poll(ref, ticket)
        if view is None:
            return False
        await _send_json(
            send,
            200,
            ticket_status_payload(view),
            secure=secure,
            extra=(
                (b"x-poll-after-seconds", f"{view.poll_after_seconds:g}".encode()),
                (b"cache-control", b"no-store"),
            ),
        )
        STATUS_SECONDS.observe(time.perf_counter() - started)
        return True

    async def _join(self, scope: Scope, receive: Receive, send: Send, slug: str) -> bool:
        started = time.perf_counter()
        if _has_cookie(scope, settings.SESSION_COOKIE_NAME.encode()):
            return False  # a logged-in fan joins as their account: Django knows who that is
        secure = _served_securely(scope)
        if secure is None:
            return False
        body = await _read_body(receive, limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        if body is None:
            return True  # the client went away
        request = ASGIRequest(scope, io.BytesIO(body))
        if len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            response: HttpResponse = error_response(body_too_large())
        else:
            try:
                response = await self.joins.submit(request, slug)
            except Exception as exc:  # noqa: BLE001  (the batch thread itself failed)
                response = api_exception_response(request, exc)
        await _send_response(send, response, secure=secure)
        JOIN_SECONDS.observe(time.perf_counter() - started)
        return True


class JoinBatcher:
    """Group commit: one batch of joins commits in a thread of its own while the next one
    gathers. A lone join goes at once; under load, batches grow by themselves to what
    arrived during the last commit (at most ``WR_JOIN_BATCH_MAX``)."""

    def __init__(self) -> None:
        self._pending: list[tuple[HttpRequest, str, asyncio.Future[HttpResponse]]] = []
        self._draining = False
        self._drainer: asyncio.Task[None] | None = None
        # One thread: batches of a process commit one after another, each under one lock
        # of the chain head, rather than contending for it (two in flight measured slower
        # on the benchmark's two cores: more lock waits and context switches).
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="join-batch")

    async def submit(self, request: HttpRequest, slug: str) -> HttpResponse:
        future: asyncio.Future[HttpResponse] = asyncio.get_running_loop().create_future()
        self._pending.append((request, slug, future))
        if not self._draining:
            self._draining = True
            # Kept referenced: the loop holds only a weak reference to its tasks.
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                limit = settings.WR_JOIN_BATCH_MAX
                batch, self._pending = self._pending[:limit], self._pending[limit:]
                items = [(request, slug) for request, slug, _ in batch]
                try:
                    responses = await loop.run_in_executor(self._executor, _commit_batch, items)
                except Exception as exc:  # noqa: BLE001  (the thread itself failed)
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, _, future), response in zip(batch, responses, strict=True):
                    if not future.done():
                        future.set_result(response)
        finally:
            self._draining = False


def _commit_batch(items: Sequence[tuple[HttpRequest, str]]) -> list[HttpResponse]:
    """In the batch thread: like one Django request, with its connection checks around it."""
    close_old_connections()
    try:
        return join_batch(items)
    except Exception as exc:  # noqa: BLE001  every fan of the batch gets the API's answer
        # join_batch answers each fan's own failures; what reaches here failed before any
        # join of the batch committed. The middleware's mapping says what fans are told
        # (503 while PostgreSQL is unreachable, never an HTML page).
        return [api_exception_response(request, exc) for request, _ in items]
    finally:
        close_old_connections()


def _served_securely(scope: Scope) -> bool | None:
    """Whether Django would serve this request over HTTPS (True), over HTTP (False), or not
    at all here (None: a Host it refuses, or HTTP where it redirects to HTTPS).

    Asked of Django's own request object, remembered per combination of the headers its
    answer depends on: the status path is too hot to build a request object every time."""
    wanted = _routing_headers()
    headers = [(name, value) for name, value in scope.get("headers", ()) if name in wanted]
    return _served_securely_for(
        scope.get("scheme", "http"),
        tuple(value for _, value in headers),
        tuple(name for name, _ in headers),
        tuple(server) if (server := scope.get("server")) else None,  # a list, for some servers
    )


@functools.cache
def _routing_headers() -> frozenset[bytes]:
    """The headers Django's get_host() and is_secure() read (as ASGI names)."""
    names = {b"host", b"x-forwarded-host", b"x-forwarded-port"}
    if settings.SECURE_PROXY_SSL_HEADER:
        meta_name = settings.SECURE_PROXY_SSL_HEADER[0].removeprefix("HTTP_")
        names.add(meta_name.lower().replace("_", "-").encode("latin-1"))
    return frozenset(names)


@functools.lru_cache(maxsize=512)
def _served_securely_for(
    scheme: str,
    values: tuple[bytes, ...],
    names: tuple[bytes, ...],
    server: tuple[str, int] | None,
) -> bool | None:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "scheme": scheme,
        "server": server,
        "headers": list(zip(names, values, strict=True)),
    }
    request = ASGIRequest(scope, io.BytesIO(b""))
    try:
        request.get_host()
    except DisallowedHost:
        return None
    if settings.SECURE_SSL_REDIRECT and not request.is_secure():
        return None
    return request.is_secure()


def _forget_served_securely(**kwargs: object) -> None:
    _routing_headers.cache_clear()
    _served_securely_for.cache_clear()


setting_changed.connect(_forget_served_securely)


def _has_cookie(scope: Scope, name: bytes) -> bool:
    return any(key == b"cookie" and name + b"=" in value for key, value in scope.get("headers", ()))


async def _read_body(receive: Receive, *, limit: int) -> bytes | None:
    """The whole body, or its first ``limit`` + 1 bytes; None if the client disconnected."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit or not message.get("more_body", False):
            return b"".join(chunks)


async def _send_json(
    send: Send,
    status: int,
    payload: dict[str, Any],
    *,
    secure: bool,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> None:
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
        *hot_path_headers(secure=secure),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_response(send: Send, response: HttpResponse, *, secure: bool) -> None:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.items()
    ]
    headers += [
        (b"set-cookie", cookie.output(header="").strip().encode("latin-1"))
        for cookie in response.cookies.values()
    ]
    headers.append((b"content-length", str(len(response.content)).encode()))
    headers += hot_path_headers(secure=secure)
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.content})
