"""Calling an ASGI app in-process, as a server would, for tests of the lean paths."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class AsgiReply:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with "\n"
    raw: bytes
    chunks_read: int = 0  # body messages the app asked for

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None


async def asgi_call(
    app: Any,
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    scheme: str = "http",
    query: str = "",
    chunks: Sequence[bytes] | None = None,
) -> AsgiReply:
    """``chunks``: the body in several messages (``more_body``), as a server passes on one
    sent chunked; give it with no ``content-length`` in ``headers`` to be one."""
    messages = [body] if chunks is None else list(chunks) or [b""]
    all_headers = {"host": "testserver", **(headers or {})}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": scheme,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in all_headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    sent = 0
    replies: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent < len(messages):
            sent += 1
            more = sent < len(messages)
            return {"type": "http.request", "body": messages[sent - 1], "more_body": more}
        await asyncio.sleep(3600)  # nothing more: the client waits for its answer
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        replies.append(message)

    await app(scope, receive, send)
    start = next(m for m in replies if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in replies if m["type"] == "http.response.body")
    collected: dict[str, str] = {}
    for name, value in start["headers"]:
        key = name.decode().lower()
        collected[key] = (
            f"{collected[key]}\n{value.decode()}" if key in collected else value.decode()
        )
    return AsgiReply(status=start["status"], headers=collected, raw=content, chunks_read=sent)


def call(app: Any, method: str, path: str, **kwargs: Any) -> AsgiReply:
    return asyncio.run(asgi_call(app, method, path, **kwargs))
