"""Calling an ASGI app in-process, as a server would, for tests of the lean paths."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any


@dataclass
class AsgiReply:
    status: int
    headers: dict[str, str]  # lower-case names; repeated headers joined with "\n"
    raw: bytes

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
) -> AsgiReply:
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
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in all_headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    sent_body = False
    replies: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
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
    return AsgiReply(status=start["status"], headers=collected, raw=content)


def call(app: Any, method: str, path: str, **kwargs: Any) -> AsgiReply:
    return asyncio.run(asgi_call(app, method, path, **kwargs))
