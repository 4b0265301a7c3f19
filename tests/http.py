"""A tiny HTTP client for tests that talk to a real server process, and what they share: a fan
joining, a ticket's status, a checkout reported done."""

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


def fan_joins(base: str, slug: str, *, accept: tuple[int, ...] = (201,)) -> Any:
    """A new fan joins (no cookies: a new identity each time); the answer's body."""
    reply = request("POST", f"{base}/api/v1/events/{slug}/join", {})
    assert reply.status in accept, (reply.status, reply.body)
    return reply.body


def ticket_status(base: str, ticket: str) -> Any:
    reply = request("GET", f"{base}/api/v1/tickets/{ticket}")
    assert reply.status == 200, (reply.status, reply.body)
    return reply.body


def ticket_complete(base: str, event: Any, ticket: str) -> None:
    """The shop reports the checkout of this ticket's fan done, with the pass its status holds."""
    pass_complete(base, event.integration_key, ticket_status(base, ticket)["pass"])


def pass_complete(
    base: str, integration_key: str, pass_token: str, outcome: str = "completed"
) -> None:
    """The shop reports a fan's checkout over (the pass's slot is freed): done, unless told
    another outcome (``abandoned``)."""
    reply = request(
        "POST",
        f"{base}/api/v1/passes/complete",
        {"pass": pass_token, "outcome": outcome},
        {"Authorization": f"Bearer {integration_key}"},
    )
    assert reply.status == 204, reply.body
