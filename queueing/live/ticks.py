"""Live updates: one broadcast per event per tick, whatever the size of the line.

A tick carries what a page needs to work out its own position: per tier, the count and a
sketch of ``(rank, order key)`` checkpoints (dense at the front, geometric behind), plus the
measured throughput for the wait estimate. Each page knows its own order key and tier from its
snapshot and places itself between two checkpoints. Building a tick costs
O(checkpoints * log n); sending it is one publish. Personal messages go only to admitted fans
(``queueing/hot/channels.py``), and, once at the start, to pages that showed the pre-queue
(their shuffled place: ``queueing/web/consumers.py``).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from django.conf import settings

from events.models import Event, EventState
from queueing.hot import channels, stats
from queueing.line.lanes import lanes_summary_publish
from queueing.line.reads import event_layout, line_reads
from queueing.rules.layout import EventLayout

logger = logging.getLogger(__name__)


EXACT_FRONT = 32


GROWTH = 1.15


MAX_RANK = 10**9


def checkpoint_ranks() -> list[int]:
    """Every rank at the front (where fans watch closely), then ~15% apart."""
    ranks = list(range(EXACT_FRONT))
    rank = float(EXACT_FRONT)
    while rank < MAX_RANK:
        ranks.append(int(rank))
        rank = max(rank * GROWTH, rank + 1)
    return ranks


CHECKPOINT_RANKS = checkpoint_ranks()


def event_limits(event: Event) -> dict[str, int]:
    """The settings that bound a wait while the pace is still measured (rules/eta.py
    ``wait_bound``): ticks carry them, and so does the page (queueing/web/pages.py)."""
    return {
        "rate": event.rate_per_minute,
        "capacity": event.capacity,
        "session": event.session_seconds,
    }


def tick_payload(event: Event, layout: EventLayout, *, now: datetime) -> dict[str, Any] | None:
    if layout.lanes > 1:
        # Every lane read once, the summary each poll places its fan by kept, and the
        # whole line sketched across the lanes (line/lanes.py).
        line = lanes_summary_publish(layout, ttl_seconds=settings.WR_TICK_CACHE_SECONDS)
    else:
        line = line_reads.sketch(layout, ranks=CHECKPOINT_RANKS)
    if line is None:
        return None  # pages keep their last figures (and poll) until the index is whole
    throughput = line_reads.throughput(layout)
    return {
        "type": "tick",
        "at": now.timestamp(),
        "state": event.state_at(now).value,
        # Pages show the maintenance notice (and staff's word) live from these two.
        "mode": event.mode,
        "message": event.message or None,
        # Sold out: every page turns to "Sold out" (with staff's word) from this tick.
        "sold_out_at": event.sold_out_at.isoformat() if event.sold_out_at else None,
        "sold_out_message": event.sold_out_message or None,
        "prequeue": line.prequeue,
        "queue_length": line.prequeue + sum(t.count for t in line.tiers),
        "tiers": [
            {"id": t.tier_id, "count": t.count, "checkpoints": [list(c) for c in t.checkpoints]}
            for t in line.tiers
        ],
        "limits": event_limits(event),
        # What the page needs to quote as the server does (rules/eta.py, waiting.js).
        "throughput": (
            {
                "lam": throughput.lam,
                "scv": throughput.scv,
                "err": throughput.rel_err,
                "ranged": throughput.ranged,
                "tiers": {str(t): lam for t, lam in throughput.tier_lams},
            }
            if throughput is not None
            else None
        ),
    }


# The line has started (its pre-queue shuffled): pre-queue pages are then sent their place
# (queueing/web/consumers.py). Not a sale closed before its start: its pre-queue is revoked in
# batches, and its pages learn it when their countdown runs out.
LINE_STARTED = frozenset({EventState.OPEN, EventState.PAUSED})


def broadcast_tick(*, event_id: int, now: datetime) -> bool:
    """Publish this tick to every page watching the event: one message, cached for snapshots."""
    event = Event.objects.filter(pk=event_id).first()
    return event is not None and event_broadcast(event, now=now)


def event_broadcast(event: Event, *, now: datetime) -> bool:
    """``broadcast_tick`` for an on-sale already read (the room's tick reads it once)."""
    event_id = event.pk
    layout = event_layout(event_id)
    if layout is None:
        return False
    payload = tick_payload(event, layout, now=now)
    if payload is None:
        return False
    text = json.dumps(payload, separators=(",", ":"))
    try:
        stats.remember_tick(event_id, text)
        stats.record_line_sample(
            event_id, minute=int(now.timestamp() // 60), queue_length=payload["queue_length"]
        )
        channels.publish_tick(event_id, text, started=payload["state"] in LINE_STARTED)
    except Exception:
        # Pages fall back to polling; the line itself is unaffected.
        logger.warning("could not broadcast the tick of event %s", event_id, exc_info=True)
        return False
    return True
