"""A tiny HTTP client for tests that talk to a real server process."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


def request(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> Reply:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            raw, status, hdrs = response.read(), response.status, response.headers
    except urllib.error.HTTPError as error:
        raw, status, hdrs = error.read(), error.code, error.headers
    text = raw.decode() if raw else ""
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    return Reply(status=status, headers={k.lower(): v for k, v in hdrs.items()}, body=parsed)


def pass_complete(base: str, integration_key: str, pass_token: str) -> None:
    """The shop reports a fan's checkout done (the pass's slot is freed)."""
    reply = request(
        "POST",
        f"{base}/api/v1/passes/complete",
        {"pass": pass_token, "outcome": "completed"},
        {"Authorization": f"Bearer {integration_key}"},
    )
    assert reply.status == 204, reply.body
