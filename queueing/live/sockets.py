"""How many WebSockets a client may hold open: per ticket across the room, per address here.

A waiting page needs one socket. A ticket may be open in a few tabs or devices, so up to
``WR_SOCKETS_PER_TICKET`` stay open, and the newest wins: the oldest page is told it was
opened elsewhere and stops, which is what a fan who moved to another device expects. The
count is kept in Redis (queueing/hot/sockets.py), so it holds whichever web process each
socket reached; if Redis cannot be asked, the socket is let in (the cap protects memory, not
anybody's place).

Across tickets, one client address may hold ``WR_SOCKETS_PER_ADDRESS`` sockets in each web
process; past that its new sockets are refused and their pages poll instead. This count is per
process: it needs no round trip, and a process's memory is what it protects.
"""

from __future__ import annotations

import logging
from collections import Counter

from django.conf import settings

from queueing.hot.channels import sockets_replaced
from queueing.hot.sockets import ticket_socket_claim, ticket_socket_release
from queueing.rules.ticket_codec import TicketRef

logger = logging.getLogger(__name__)


class AddressSlots:
    """Open sockets per client address in this process (only the event loop touches it)."""

    def __init__(self) -> None:
        self._open: Counter[str] = Counter()

    def take(self, address: str) -> bool:
        limit = settings.WR_SOCKETS_PER_ADDRESS
        if limit and self._open[address] >= limit:
            return False
        self._open[address] += 1
        return True

    def give_back(self, address: str) -> None:
        self._open[address] -= 1
        if self._open[address] <= 0:
            del self._open[address]

    def held(self, address: str) -> int:
        return self._open.get(address, 0)

    def clear(self) -> None:
        self._open.clear()


address_slots = AddressSlots()


async def ticket_socket_open(ref: TicketRef, channel: str) -> None:
    """Count this socket on its ticket; the oldest beyond the cap are told to go."""
    over = await ticket_socket_claim(
        ref.event_id, ref.entry_id, channel, keep=settings.WR_SOCKETS_PER_TICKET, lane=ref.lane
    )
    if over:
        try:
            await sockets_replaced(over)
        except Exception:  # the channel layer is down: those pages stay open
            logger.warning("could not close %d replaced sockets", len(over), exc_info=True)


async def ticket_socket_closed(ref: TicketRef, channel: str) -> None:
    await ticket_socket_release(ref.event_id, ref.entry_id, channel, lane=ref.lane)
