"""The on-sale's traffic rules, fetched from the room (``GET <API_URL>/api/v1/events/<EVENT>/
traffic-rules`` with the integration key) and kept in the process.

- Fetched on first use, then again once ``ttl`` seconds have passed since the last attempt:
  a staff change applies within ``ttl`` plus one fetch. With the version the room sent as
  ``If-None-Match``, an unchanged list costs a 304 and no body.
- One fetch at a time. Before the first answer, requests wait for the fetch in flight; after
  it, they go on with the rules they have while one thread fetches.
- The room unreachable, or an answer that is not a rule list: the last good rules stay, for as
  long as it lasts (a bypass for a monitor or a block of a bad client does not lapse because
  the room is down). Never fetched: no rules, so every request queues.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from waitingroom_gate.gate_stats import count
from waitingroom_gate.traffic_rules import RulesUnreadable, TrafficRule, traffic_rules_compile

logger = logging.getLogger("waitingroom_gate")

# A long rule list is a few hundred kB; anything much larger is not the room's.
MAX_RULES_BYTES = 8 * 1024 * 1024

# (status, ETag, body) of GET url with these headers; OSError-like failures raise RulesUnreachable.
Fetch = Callable[[str, dict[str, str], float], tuple[int, str, bytes]]


class RulesUnreachable(Exception):
    """The room did not answer."""


def http_get(url: str, headers: dict[str, str], timeout: float) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return (
                response.status,
                response.headers.get("ETag", ""),
                response.read(MAX_RULES_BYTES + 1),
            )
    except urllib.error.HTTPError as error:  # 304 included: urllib raises for it
        return error.code, error.headers.get("ETag", ""), error.read(64 * 1024)
    except (OSError, http.client.HTTPException) as error:
        raise RulesUnreachable(str(error)) from error


class TrafficRulesSource:
    def __init__(
        self,
        url: str,
        *,
        integration_key: str,
        ttl: float = 10.0,
        timeout: float = 3.0,
        fetch: Fetch = http_get,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.ttl = ttl
        self.timeout = timeout
        self._key = integration_key
        self._fetch = fetch
        self._clock = clock
        self._fetch_lock = threading.Lock()
        # The rules and their ETag, replaced together (one assignment).
        self._current: tuple[tuple[TrafficRule, ...], str] = ((), "")
        self._fetched = False  # whether the room ever answered with rules
        self._attempted_at: float | None = None
        self.fetches = 0  # attempts so far, for tests and operators

    @property
    def version(self) -> str:
        """The ETag of the rules in use ("" before any)."""
        return self._current[1]

    def rules(self) -> tuple[TrafficRule, ...]:
        now = self._clock()
        if self._attempted_at is None or now - self._attempted_at >= self.ttl:
            if not self._fetched:
                with self._fetch_lock:  # nothing to go on with yet: wait for the first answer
                    self._refresh_if_due(now)
            elif self._fetch_lock.acquire(blocking=False):
                try:
                    self._refresh_if_due(now)
                finally:
                    self._fetch_lock.release()
        return self._current[0]

    def _refresh_if_due(self, now: float) -> None:
        if self._attempted_at is not None and now - self._attempted_at < self.ttl:
            return  # another thread fetched while this one waited
        self._attempted_at = now
        self.fetches += 1
        rules, etag = self._current
        headers = {"Authorization": f"Bearer {self._key}"}
        if etag:
            headers["If-None-Match"] = etag
        try:
            status, new_etag, body = self._fetch(self.url, headers, self.timeout)
            if status == 304 and etag:
                return
            if status != 200:
                raise RulesUnreadable(f"the room answered {status}")
            if len(body) > MAX_RULES_BYTES:
                raise RulesUnreadable("the answer is too large")
            document = json.loads(body)
            if not isinstance(document, dict):
                raise RulesUnreadable("the answer is not a JSON object")
            self._current = (traffic_rules_compile(document.get("traffic_rules")), new_etag)
            self._fetched = True
        except (RulesUnreachable, RulesUnreadable, ValueError) as error:
            count("rules_fetch_failures")
            # 401: the key is wrong or was rotated in the room; the shop's operator must act.
            logger.warning(
                "waiting room traffic rules unavailable at %s (keeping %d rules): %s",
                self.url,
                len(rules),
                error,
            )
