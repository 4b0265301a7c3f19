"""The gate's policy while the room cannot be reached (``FAIL_OPEN_MINUTES``).

The room counts as unreachable for a request the gate cannot check without it:
- no usable keys: the JWKS was never fetched, or the last good keys are past
  ``JWKS_CACHE_SECONDS`` + ``JWKS_STALE_SECONDS`` and a refetch failed; or
- the online check (``ONLINE_CHECK``, with ``ONLINE_CHECK_FAIL_OPEN`` off) got no verdict.

Fail closed (0 minutes): such a request gets the busy page (503 with Retry-After). Fail open
(N > 0): for N minutes from the outage's first failed request such requests go through
unchecked, each counted and logged; after that, fail closed until the room answers again. Each
cause has its own outage, so that one part of the room answering cannot restart the window of
another that does not.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from waitingroom_gate.gate_stats import count

logger = logging.getLogger("waitingroom_gate")


class RoomOutage:
    def __init__(
        self,
        cause: str,
        *,
        fail_open_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cause = cause  # for the logs: "no keys", "online check"
        self.fail_open_seconds = fail_open_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None  # the outage's first failed request
        self._window_told = False  # whether the end of the fail-open window was logged

    @property
    def since(self) -> float | None:
        return self._since

    def answered(self) -> None:
        """The room answered: the outage, if any, is over (a later one gets its own window)."""
        if self._since is None:  # the common case: no lock on the hot path
            return
        with self._lock:
            if self._since is None:
                return
            lasted = self._clock() - self._since
            self._since = None
        logger.warning("waiting room reachable again (%s) after %.0f s", self.cause, lasted)

    def let_through(self) -> bool:
        """For a request that cannot be checked: True to let it through unchecked (within the
        fail-open window), False for the busy page. Either way counted and logged."""
        now = self._clock()
        with self._lock:
            if self._since is None:
                self._since = now
                self._window_told = False
                policy = (
                    f"failing open for at most {self.fail_open_seconds:g} s"
                    if self.fail_open_seconds > 0
                    else "failing closed"
                )
                logger.warning("waiting room unreachable (%s): %s", self.cause, policy)
            open_ = now - self._since < self.fail_open_seconds
            window_over = self.fail_open_seconds > 0 and not open_ and not self._window_told
            if window_over:
                self._window_told = True
        if open_:
            total = count("room_unreachable_let_through")
            # One line per request: the shop must be able to tell which went through unchecked.
            logger.warning(
                "waiting room unreachable (%s): request let through unchecked (%d so far)",
                self.cause,
                total,
            )
            return True
        count("room_unreachable_refused")
        if window_over:
            logger.warning(
                "waiting room unreachable (%s): the %g s fail-open window is over; failing "
                "closed until the room answers",
                self.cause,
                self.fail_open_seconds,
            )
        return False
