"""The reference the benchmark measures in the same run: a bare ASGI app on uvicorn that makes
one async Redis call per request and answers JSON, with no framework at all. Ratios against it
survive a noisy machine better than absolute numbers.

Run: uvicorn bench.reference_app:app --loop uvloop --http httptools
"""

from __future__ import annotations

import json
import os
from typing import Any

import redis.asyncio as aioredis

_redis = aioredis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
_KEY = os.environ.get("REFERENCE_KEY", "bench:reference")


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    rank = await _redis.zrank(_KEY, "member")
    body = json.dumps({"status": "waiting", "position": rank, "queue_length": 1}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
