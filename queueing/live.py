"""Live updates: one broadcast per event per tick, whatever the size of the line.

A tick carries what a page needs to work out its own position: per tier, the count and a
sketch of ``(rank, order key)`` checkpoints (dense at the front, geometric behind), plus the
measured throughput for the wait estimate. Each page knows its own order key and tier from its
snapshot and places itself between two checkpoints. Building a tick costs
O(checkpoints * log n); sending it is one publish. Personal messages go only to admitted fans.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from events.models import Event
from queueing import hot_index
from queueing.hot_index import HotIndexUnavailable, IndexState
from queueing.layout import EventLayout, event_layout
from queueing.throughput import current_throughput

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


def event_group(event_id: int) -> str:
    return f"line.{event_id}"


def ticket_group(entry_id: int) -> str:
    return f"ticket.{entry_id}"


def tick_payload(event: Event, layout: EventLayout, *, now: datetime) -> dict[str, Any] | None:
    try:
        line = hot_index.sketch(layout, ranks=CHECKPOINT_RANKS)
    except HotIndexUnavailable:
        return None
    if line.state is not IndexState.READY:
        return None  # pages keep their last figures (and poll) until the index is whole
    throughput = current_throughput(layout)
    return {
        "type": "tick",
        "at": now.timestamp(),
        "state": event.state_at(now).value,
        "prequeue": line.prequeue,
        "queue_length": line.prequeue + sum(t.count for t in line.tiers),
        "tiers": [
            {"id": t.tier_id, "count": t.count, "checkpoints": [list(c) for c in t.checkpoints]}
            for t in line.tiers
        ],
        "throughput": (
            {"lam": throughput.lam, "scv": throughput.scv} if throughput is not None else None
        ),
    }


def broadcast_tick(*, event_id: int, now: datetime) -> bool:
    """Publish this tick to every page watching the event: one message, cached for snapshots."""
    event = Event.objects.filter(pk=event_id).first()
    layout = event_layout(event_id)
    if event is None or layout is None:
        return False
    payload = tick_payload(event, layout, now=now)
    if payload is None:
        return False
    text = json.dumps(payload, separators=(",", ":"))
    try:
        hot_index.remember_tick(event_id, text)
        hot_index.record_line_sample(
            event_id, minute=int(now.timestamp() // 60), queue_length=payload["queue_length"]
        )
        async_to_sync(get_channel_layer().group_send)(
            event_group(event_id), {"type": "line.tick", "text": text}
        )
    except Exception:
        # Pages fall back to polling; the line itself is unaffected.
        logger.warning("could not broadcast the tick of event %s", event_id, exc_info=True)
        return False
    return True


def notify_admitted(entry_ids: Iterable[int]) -> None:
    """Personal work, only for fans just let in: their page fetches its pass at once. One
    event loop and connection for the whole batch, not one per fan."""
    ids = list(entry_ids)
    if not ids:
        return

    async def send_all() -> None:
        layer = get_channel_layer()
        await asyncio.gather(
            *(layer.group_send(ticket_group(i), {"type": "ticket.admitted"}) for i in ids)
        )

    try:
        async_to_sync(send_all)()
    except Exception:
        # The next tick or poll tells the pages anyway.
        logger.warning("could not notify %d admitted entries", len(ids), exc_info=True)
