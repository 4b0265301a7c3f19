"""The optional online check: asks the room (``POST /api/v1/passes/verify``) whether a pass's
session is still open, which offline verification cannot know (completed, abandoned or
revoked sessions keep a valid signature until ``exp``). Answers are cached briefly per pass,
so a fan browsing the shop costs the room one call per ``ttl`` seconds, not one per page."""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger("waitingroom_gate")

# Past this many cached answers, expired ones are dropped; still past it, all are (a memory
# bound, not a tuning knob: each entry is one pass's verdict).
MAX_CACHED_VERDICTS = 10_000


class RoomUnreachable(Exception):
    """The room did not answer passes/verify with what its API promises."""


@dataclass(frozen=True)
class OnlineVerdict:
    valid: bool
    reason: str  # "" when valid; the room's reason ("completed", "revoked", ...) otherwise


Post = Callable[[str, dict[str, str], float], tuple[int, bytes]]


def http_post(url: str, body: dict[str, str], timeout: float) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(64 * 1024)
    except urllib.error.HTTPError as error:
        return error.code, error.read(64 * 1024)
    except (OSError, http.client.HTTPException) as error:
        raise RoomUnreachable(str(error)) from error


class OnlineChecker:
    def __init__(
        self,
        url: str,
        *,
        event: str,
        ttl: float = 10.0,
        timeout: float = 3.0,
        post: Post = http_post,
        clock: Callable[[], float] = time.monotonic,
        answered: Callable[[], None] = lambda: None,
    ) -> None:
        self.url = url
        self._answered = answered  # told of each verdict the room gave (not of cached ones)
        self.event = event
        self.ttl = ttl
        self.timeout = timeout
        self._post = post
        self._clock = clock
        self._lock = threading.Lock()
        self._verdicts: dict[str, tuple[float, OnlineVerdict]] = {}

    def verdict(self, token: str) -> OnlineVerdict:
        """The room's verdict on ``token`` (cached); RoomUnreachable when it cannot say."""
        now = self._clock()
        with self._lock:
            cached = self._verdicts.get(token)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        # Not under the lock: one slow answer from the room must not hold up other fans.
        verdict = self._ask(token)
        self._answered()
        with self._lock:
            self._forget_old(now)
            self._verdicts[token] = (now, verdict)
        return verdict

    def _ask(self, token: str) -> OnlineVerdict:
        status, body = self._post(self.url, {"pass": token, "event": self.event}, self.timeout)
        try:
            answer = json.loads(body)
        except ValueError as error:
            raise RoomUnreachable("the room's answer was not JSON") from error
        if (
            status != 200
            or not isinstance(answer, dict)
            or not isinstance(answer.get("valid"), bool)
        ):
            raise RoomUnreachable(f"the room answered {status}")
        if answer["valid"]:
            return OnlineVerdict(valid=True, reason="")
        return OnlineVerdict(valid=False, reason=str(answer.get("reason") or "invalid"))

    def _forget_old(self, now: float) -> None:
        if len(self._verdicts) < MAX_CACHED_VERDICTS:
            return
        self._verdicts = {
            token: entry for token, entry in self._verdicts.items() if now - entry[0] < self.ttl
        }
        if len(self._verdicts) >= MAX_CACHED_VERDICTS:
            self._verdicts.clear()
