"""What the gate counts in this process, for the shop to read (``waitingroom_gate.stats()``):
its traffic-rule decisions and, above all, every request let through unchecked or refused
because the room could not be reached."""

from __future__ import annotations

import threading
from collections import Counter

COUNTERS = (
    "traffic_bypass",  # a rule let the request through without a pass
    "traffic_block",  # a rule refused it (403)
    "rules_fetch_failures",  # the rules could not be fetched (the last good ones stayed)
    "room_unreachable_let_through",  # fail open: let through unchecked
    "room_unreachable_refused",  # fail closed: the busy page (503)
    "online_check_unconfirmed",  # ONLINE_CHECK_FAIL_OPEN let an offline-valid pass in
)

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def count(name: str) -> int:
    """Adds one to ``name``; its new value."""
    with _lock:
        _counts[name] += 1
        return _counts[name]


def stats() -> dict[str, int]:
    """Every counter of this process since it started (0 for those never counted)."""
    with _lock:
        return {name: _counts[name] for name in COUNTERS}
