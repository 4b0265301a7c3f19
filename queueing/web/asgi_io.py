"""The raw ASGI side of the lean paths: reading a body, deciding whether Django would serve
the request here and over HTTPS, and answers ready to send with Django's security headers.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse
from django.test.signals import setting_changed

from queueing.web.middleware import (
    hot_path_headers,
)

Scope = MutableMapping[str, Any]


Message = MutableMapping[str, Any]


Receive = Callable[[], Awaitable[Message]]


Send = Callable[[Message], Awaitable[None]]


ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Reply(NamedTuple):
    """A lean answer, ready for the ASGI server."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


# Handled, with nothing to send: the client went away before its join was read.
SILENT = Reply(0, [], b"")


def served_securely(scope: Scope) -> bool | None:
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


def has_cookie(scope: Scope, name: bytes) -> bool:
    return any(key == b"cookie" and name + b"=" in value for key, value in scope.get("headers", ()))


async def read_body(receive: Receive, *, limit: int) -> bytes | None:
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


def json_reply(
    status: int,
    payload: dict[str, Any],
    *,
    secure: bool,
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> Reply:
    body = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra,
        *hot_path_headers(secure=secure),
    ]
    return Reply(status, headers, body)


def reply(response: HttpResponse, *, secure: bool) -> Reply:
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
    return Reply(response.status_code, headers, response.content)
