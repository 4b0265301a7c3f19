"""The room reads no more of a request than it will serve: an ASGI layer in front of
everything (the lean paths and Django alike, config/asgi.py).

Django's ASGI handler receives a whole body before any middleware runs, and a body sent
chunked (no ``Content-Length``) has no size to refuse it by: it would be spooled whole, to
disk past ``FILE_UPLOAD_MAX_MEMORY_SIZE``, only to be refused afterwards. Here the body is
counted as it arrives, and reading stops with the message that takes it past
``DATA_UPLOAD_MAX_MEMORY_SIZE`` (under /admin/, that plus room for a logo upload): the
application behind, handed no more than the limit, is
told the client went away, and the client gets ``400 bad_request``. A declared
``Content-Length`` over the limit and, under /api/, a query string with more fields than
``DATA_UPLOAD_MAX_NUMBER_FIELDS`` are refused before anything is read
(``queueing.web.api_errors.unreadable_request``, which ApiErrorMiddleware also asks for requests
that do not come through here). Outside /api/ the answer is plain text, as Django's pages
would refuse such a body.
"""

from __future__ import annotations

import json
import logging

from queueing.web.api_errors import ApiError, body_limit, body_too_large, unreadable_request
from queueing.web.asgi_io import ASGIApp, Message, Receive, Scope, Send, served_securely
from queueing.web.middleware import hot_path_headers

logger = logging.getLogger(__name__)

_DISCONNECT: Message = {"type": "http.disconnect"}


class RequestLimits:
    """ASGI app: ``inner`` behind the limits on what a request may make the room read."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        api = scope["path"].startswith("/api/")
        query = scope.get("query_string", b"") if api else b""
        declared = [value for name, value in scope.get("headers", ()) if name == b"content-length"]
        if query or declared:
            refusal = unreadable_request(
                query_string=query, content_length=b",".join(declared), path=scope["path"]
            )
            if refusal is not None:
                await _refuse(scope, send, refusal, api=api)
                return
        limit = body_limit(scope["path"])
        if limit is None:
            await self.inner(scope, receive, send)
            return
        body = _CappedBody(receive, send, limit=limit)
        await self.inner(scope, body.receive, body.send)
        if body.cut and not body.answered:
            await _refuse(scope, send, body_too_large(), api=api)


class _CappedBody:
    """The ASGI receive and send of one request, counting its body as the app reads it."""

    __slots__ = ("_receive", "_send", "answered", "cut", "limit", "received")

    def __init__(self, receive: Receive, send: Send, *, limit: int) -> None:
        self._receive = receive
        self._send = send
        self.limit = limit
        self.received = 0
        self.cut = False  # the body went over the limit: the app was told the client left
        self.answered = False  # the app started an answer

    async def receive(self) -> Message:
        if self.cut:
            return _DISCONNECT
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                # Not a byte more reaches the app: to it, the client went away.
                self.cut = True
                return _DISCONNECT
        return message

    async def send(self, message: Message) -> None:
        self.answered = True
        await self._send(message)


async def _refuse(scope: Scope, send: Send, refusal: ApiError, *, api: bool) -> None:
    logger.warning("refused to read %s %r: %s", scope["method"], scope["path"], refusal.detail)
    if api:
        body = json.dumps(refusal.body()).encode()
        content_type = b"application/json"
    else:
        body = f"Bad request: {refusal.detail}\n".encode()
        content_type = b"text/plain; charset=utf-8"
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        *hot_path_headers(secure=bool(served_securely(scope))),
    ]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
