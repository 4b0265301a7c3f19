"""The request id (``X-Request-ID``) that follows a request through the room's processes.

nginx sets it (its own ``$request_id`` unless a trusted one came in: deploy/nginx); the web
process takes a well-formed incoming id or makes one, answers it in ``X-Request-ID``, and
holds it in a context variable for the length of the request, which the log formatter reads
(config/logs.py). A Celery task sent while handling the request carries it in its message
headers, and the task's log lines carry it in turn (config/celery.py). A join keeps it with
the fan's entry, so that the admission run that lets the fan in can log it.

One ASGI wrapper (``RequestIds``, around the whole application in config/asgi.py) covers
the lean paths and Django alike, writing the chosen id into the request's headers so that
both read the same one; ``RequestIdMiddleware`` does the same for Django reached without it
(WSGI, the test client).
"""

from __future__ import annotations

import contextvars
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-ID"
_HEADER_NAME = b"x-request-id"
META_KEY = "HTTP_X_REQUEST_ID"

# What an incoming id may be: what nginx's $request_id (32 hex digits), a UUID or another
# proxy's id look like, and nothing that could forge a log line or smuggle markup into one.
_WELL_FORMED = re.compile(r"[A-Za-z0-9._:-]{8,64}")

current_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "request_id", default=None
)


def request_id_new() -> str:
    """A fresh id in nginx's own form (32 hex digits)."""
    return secrets.token_hex(16)


def request_id_valid(raw: str | bytes | None) -> str | None:
    """``raw`` if it is a well-formed request id; None otherwise."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("ascii")
        except UnicodeDecodeError:
            return None
    return raw if _WELL_FORMED.fullmatch(raw) else None


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class RequestIds:
    """ASGI app: each HTTP request and WebSocket gets its id (the incoming one if well
    formed), in the scope's headers for whoever reads them, in ``current_request_id`` while
    it is handled, and in the HTTP answer's ``X-Request-ID``."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.inner(scope, receive, send)
            return
        headers = scope.get("headers", ())
        incoming = None
        for name, value in headers:
            if name == _HEADER_NAME:
                incoming = value
                break
        request_id = request_id_valid(incoming)
        if request_id is None:
            request_id = request_id_new()
            # Replaced, not added: Django joins repeated headers with commas.
            scope = {
                **scope,
                "headers": [
                    *(pair for pair in headers if pair[0] != _HEADER_NAME),
                    (_HEADER_NAME, request_id.encode()),
                ],
            }
        encoded = request_id.encode()
        token = current_request_id.set(request_id)
        try:
            if scope["type"] == "http":
                await self.inner(scope, receive, _answering(send, encoded))
            else:
                await self.inner(scope, receive, send)
        finally:
            current_request_id.reset(token)


def _answering(send: Send, request_id: bytes) -> Send:
    async def answer(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            if not any(name.lower() == _HEADER_NAME for name, _ in headers):
                headers.append((_HEADER_NAME, request_id))
            message = {**message, "headers": headers}
        await send(message)

    return answer


class RequestIdMiddleware:
    """Django's side: the request's id (RequestIds already chose it under ASGI) in
    ``request.META``, in ``current_request_id`` and in the answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = request_id_valid(request.META.get(META_KEY)) or request_id_new()
        request.META[META_KEY] = request_id
        token = current_request_id.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            current_request_id.reset(token)
        if HEADER not in response:
            response[HEADER] = request_id
        return response


def request_id_of(request: HttpRequest) -> str | None:
    """The request's id as RequestIds or RequestIdMiddleware chose it; None for a request
    that passed through neither."""
    return request_id_valid(request.META.get(META_KEY))
