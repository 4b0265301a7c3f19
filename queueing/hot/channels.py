"""The channel layer's groups (Redis pub/sub): one per event for ticks, one per ticket for
the personal "you are in" message, and the publishes to them; and the word to one socket that a
newer one on its ticket replaced it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)


def event_group(event_id: int) -> str:
    return f"line.{event_id}"


def ticket_group(entry_id: int) -> str:
    return f"ticket.{entry_id}"


def publish_tick(event_id: int, text: str, *, started: bool) -> None:
    """One message to every page watching the event (through each web process's one
    subscription; see queueing/live/fanout.py). ``started``: the tick says the line has
    started, told beside the text so that no process reads the text to know it."""
    async_to_sync(get_channel_layer().group_send)(
        event_group(event_id), {"type": "line.tick", "text": text, "started": started}
    )


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


def notify_moved(entry_id: int) -> None:
    """The place moved to another browser: the pages still open on it stop."""
    try:
        async_to_sync(get_channel_layer().group_send)(
            ticket_group(entry_id), {"type": "ticket.moved"}
        )
    except Exception:
        # Those pages learn it when they reload (the cookie's holder no longer matches).
        logger.warning(
            "could not tell the pages of entry %s that it moved", entry_id, exc_info=True
        )


async def sockets_replaced(channels: Iterable[str]) -> None:
    """Tell these sockets (in whichever web process) that newer ones took their ticket."""
    layer = get_channel_layer()
    await asyncio.gather(*(layer.send(name, {"type": "ticket.replaced"}) for name in channels))
