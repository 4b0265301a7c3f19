"""The waiting page's WebSocket: relay only.

Connect: verify the ticket (no database), take one of the client address's sockets in this
process, join the ticket's group, accept, find the ticket's answer (a ticket its place had
before it moved to another browser is closed with 4410 here), count the socket on its ticket
(the oldest beyond the cap are told to go: queueing/live/sockets.py), then send one personal
snapshot. Afterwards the socket only relays the event's tick (serialized once for everyone,
handed over by this process's fan-out: queueing/live/fanout.py, as often as the page's distance
from the front asks: queueing/rules/tick_bands.py) and, for an admitted fan, where to go. A page
that was shown the pre-queue gets a new snapshot once a tick says the line has started:
its shuffled place, with which it turns into a waiting page where it is, rather than every
pre-queue page reloading at once (``START_SPREAD_SECONDS``). The page sends nothing; a frame
bigger than any page would send ends the socket.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from queueing.hot.channels import ticket_group
from queueing.line.answers import TicketAnswer, ticket_poll, ticket_poll_async
from queueing.line.reads import event_layout_async, line_reads
from queueing.live.fanout import Place, TickRelay, tick_relay_close, tick_relay_open
from queueing.live.sockets import address_slots, ticket_socket_closed, ticket_socket_open
from queueing.live.watchers import watchers
from queueing.rules.errors import PlaceMoved, TicketNotFound
from queueing.rules.layout import EventLayout
from queueing.rules.states import EntryStatus
from queueing.rules.ticket_codec import InvalidTicket, TicketRef, ticket_read
from queueing.web.callers import rate_key_for_ip, scope_client_ip
from queueing.web.edge_figures import OPEN_SOCKETS

CLOSE_BAD_TICKET = 4401
CLOSE_TICKET_GONE = 4404
CLOSE_REPLACED = 4409  # a newer page took this ticket's socket: the page stops
CLOSE_MOVED = 4410  # the place moved to another browser: the page says so and stops
CLOSE_TOO_MANY = 4429  # this address holds too many sockets: the page polls
CLOSE_TRY_AGAIN = 1013  # the page polls, then reconnects
CLOSE_TOO_BIG = 1009  # RFC 6455 "message too big"

REPLACED = {"type": "replaced", "detail": "This page was opened elsewhere."}

# A pre-queue page's new snapshot comes this long at most after the tick that says the line
# has started, at random: a pre-queue of thousands asks the index over seconds, not at once.
START_SPREAD_SECONDS = 3.0

logger = logging.getLogger(__name__)


def snapshot_message(
    view: TicketAnswer, layout: EventLayout, last_tick: str | None
) -> dict[str, Any]:
    return {
        "type": "snapshot",
        "status": view.status.value,
        "position": view.position,
        "queue_length": view.queue_length,
        "eta": view.eta.as_dict() if view.eta else None,
        "tier_id": view.tier_id,
        "order_key": view.order_key,
        "tiers": [{"id": t.id, "share": t.share} for t in layout.tiers],
        "heartbeat_seconds": layout.heartbeat_seconds,
        "redirect_url": view.issued_pass.redirect_url if view.issued_pass else None,
        "tick": json.loads(last_tick) if last_tick else None,
    }


class LineConsumer(AsyncWebsocketConsumer):
    ref: TicketRef | None = None
    ticket: str = ""
    layout: EventLayout | None = None
    ticks: TickRelay | None = None  # this page's share of the event's ticks (live/fanout.py)
    address: str | None = None  # the client address bucket holding one of its slots
    watching: bool = False  # keeping the ticket alive (live/watchers.py)
    replaced: bool = False
    left: bool = False
    counted: bool = False  # in waitingroom_open_sockets
    in_prequeue: bool = False  # the page was last shown the pre-queue
    place: Place | None = None  # where its last snapshot placed it, if waiting
    placing: asyncio.Task[None] | None = None  # the pre-queue page's new snapshot, on its way

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # However the socket ends (a disconnect, an error, the server cancelling it), its
            # address slot and its ticket's keep-alive end with it.
            self._leave()

    async def connect(self) -> None:
        slug = self.scope["url_route"]["kwargs"]["slug"]
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.ticket = (query.get("ticket") or [""])[0]
        try:
            ref = ticket_read(self.ticket)
        except InvalidTicket:
            await self._refuse(CLOSE_BAD_TICKET)
            return
        try:
            layout = await event_layout_async(ref.event_id)
        except DatabaseError:
            # Not the ticket's fault: the page keeps its place by polling, and reconnects.
            await self._refuse(CLOSE_TRY_AGAIN)
            return
        if layout is None or layout.slug != slug or layout.tier_index(ref.tier_id) is None:
            await self._refuse(CLOSE_BAD_TICKET)
            return
        # One bucket per IPv4 address or IPv6 /64, as the join limits count them.
        address = rate_key_for_ip(scope_client_ip(self.scope))
        if not address_slots.take(address):
            await self._refuse(CLOSE_TOO_MANY)
            return
        self.address, self.ref, self.layout = address, ref, layout
        try:
            await self.channel_layer.group_add(ticket_group(ref.entry_id), self.channel_name)
            await self.accept()
            OPEN_SOCKETS.inc()
            self.counted = True
            watchers.add(ref.event_id, ref.entry_id, layout.heartbeat_seconds, ref.lane)
            self.watching = True
            if await self._send_personal(snapshot=True, opening=True):
                # Ticks only after the snapshot: a page places itself from its order key.
                self.ticks = await tick_relay_open(ref.event_id, self._send_text)
                self._watch_for_start()
                self._place_relay()
        except BaseException:
            # The page went away mid-connect, or Redis did: no disconnect will tidy up.
            self._leave()
            raise

    async def _refuse(self, code: int) -> None:
        # Accept first: a close before the handshake would reach the page as a bare HTTP 403.
        await self.accept()
        await self.close(code=code)

    async def _send_personal(
        self, *, snapshot: bool, last_tick: str | None = None, opening: bool = False
    ) -> bool:
        """False if the ticket is gone or spent (the socket is being closed). ``last_tick``:
        the tick to put in a snapshot, if the caller has it (else it is read). ``opening``:
        the socket's first snapshot, before which it is counted on its ticket, once the
        ticket is known to be the place's (one a place had before it moved must not push
        the new browser's sockets out)."""
        assert self.ref is not None and self.layout is not None
        # From the hot index on the event loop while the fan is in line there (a page
        # connecting is as hot as a status poll when a sale starts); else from the database.
        view = await ticket_poll_async(self.ref, self.ticket) if snapshot else None
        if view is None:
            try:
                view = await database_sync_to_async(ticket_poll)(
                    ref=self.ref, ticket=self.ticket, now=timezone.now()
                )
            except TicketNotFound:
                self._leave()  # nothing to keep alive; do not wait for the disconnect
                await self.close(code=CLOSE_TICKET_GONE)
                return False
            except PlaceMoved:
                # The place moved to another browser: this ticket is spent, nothing is told.
                await self._moved()
                return False
        if opening:
            await ticket_socket_open(self.ref, self.channel_name)
        if snapshot:
            last = last_tick or await line_reads.last_tick_async(self.ref.event_id)
            await self.send(text_data=json.dumps(snapshot_message(view, self.layout, last)))
            self.in_prequeue = view.status == EntryStatus.PREQUEUE
            self.place = (
                Place(layout=self.layout, tier_id=view.tier_id, order_key=view.order_key)
                if view.status == EntryStatus.WAITING
                and view.tier_id is not None
                and view.order_key is not None
                else None
            )
            self._watch_for_start()
            self._place_relay()
        elif view.status == EntryStatus.ADMITTED and view.issued_pass is not None:
            await self.send(
                text_data=json.dumps(
                    {"type": "admitted", "redirect_url": view.issued_pass.redirect_url}
                )
            )
        return True

    async def disconnect(self, code: int) -> None:
        self._leave()
        if self.ref is None:
            return
        await self.channel_layer.group_discard(ticket_group(self.ref.entry_id), self.channel_name)
        if not self.replaced:  # a replaced socket was already taken off its ticket
            await ticket_socket_closed(self.ref, self.channel_name)

    def _leave(self) -> None:
        """Give the address's slot back, stop keeping the ticket alive and relaying ticks
        (once, whoever asks first)."""
        if self.left:
            return
        self.left = True
        if self.counted:
            OPEN_SOCKETS.dec()
        if self.address is not None:
            address_slots.give_back(self.address)
        if self.ref is None:
            return
        if self.watching:
            watchers.remove(self.ref.event_id, self.ref.entry_id)
        if self.ticks is not None:
            self.ticks.on_started = None
            tick_relay_close(self.ref.event_id, self.ticks)
        # Not from within itself: a placing that finds the ticket gone still closes the socket.
        if self.placing is not None and self.placing is not asyncio.current_task():
            self.placing.cancel()

    def _watch_for_start(self) -> None:
        if self.ticks is not None:
            self.ticks.on_started = self._line_started if self.in_prequeue else None

    def _place_relay(self) -> None:
        """How often the page is sent the tick follows where its snapshot placed it
        (queueing/rules/tick_bands.py)."""
        if self.ticks is not None:
            self.ticks.placed(self.place, prequeue=self.in_prequeue)

    def _line_started(self) -> None:
        """A tick says the line has started and this page still shows the pre-queue: send
        it its shuffled place, a random moment within ``START_SPREAD_SECONDS`` from now. If
        the shuffle has not run yet, the page still shows the pre-queue and the next tick
        tries again."""
        if self.placing is None and not self.left:
            self.placing = asyncio.get_running_loop().create_task(self._place_after_start())

    async def _place_after_start(self) -> None:
        try:
            await asyncio.sleep(random.uniform(0.0, START_SPREAD_SECONDS))
            if not self.left:  # a newer page may have taken the ticket meanwhile
                # The tick that said the line started is at hand: no need to read it again.
                newest = self.ticks.newest if self.ticks is not None else None
                await self._send_personal(snapshot=True, last_tick=newest)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The next tick tries again; a broken socket is its own disconnect's to tidy up.
            logger.info("a pre-queue page's place after the start could not be sent", exc_info=True)
        finally:
            self.placing = None

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Pages have nothing to say; whatever arrives is ignored, unless it is bigger than a
        page would ever send (the server refuses such frames first where it can:
        config/workers.py)."""
        limit = settings.WR_WS_MAX_MESSAGE_BYTES
        if text_data is not None:
            # Characters never outnumber their UTF-8 bytes: encode only when it could matter.
            size = len(text_data)
            if limit // 4 < size <= limit:
                size = len(text_data.encode("utf-8", "surrogatepass"))
        else:
            size = len(bytes_data or b"")
        if size > limit:
            self._leave()
            await self.close(code=CLOSE_TOO_BIG)

    async def _send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def ticket_admitted(self, message: dict[str, Any]) -> None:
        await self._send_personal(snapshot=False)

    async def ticket_moved(self, message: dict[str, Any]) -> None:
        """The place moved to another browser (queueing/line/place_links.py): say so, close."""
        if self.left:
            return
        await self._moved()

    async def _moved(self) -> None:
        await self.send(text_data=json.dumps({"type": "moved"}))
        self._leave()
        await self.close(code=CLOSE_MOVED)

    async def ticket_replaced(self, message: dict[str, Any]) -> None:
        """A newer socket took this ticket (another tab or device): say why, then close."""
        if self.left:
            return
        self.replaced = True
        await self.send(text_data=json.dumps(REPLACED))
        self._leave()
        await self.close(code=CLOSE_REPLACED)
