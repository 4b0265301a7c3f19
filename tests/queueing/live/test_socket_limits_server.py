"""WebSocket limits on the real server (gunicorn + uvicorn workers, channels-redis pub/sub)."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from contextlib import ExitStack
from urllib.parse import urlsplit

import pytest
from django.utils import timezone
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from queueing.live.ticks import broadcast_tick
from tests.browser import chromium
from tests.http import request
from tests.processes import running_stack

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


class RawSocket:
    """A WebSocket client by hand, to send what no library would: half a frame."""

    def __init__(self, base: str, path: str) -> None:
        url = urlsplit(base)
        self.sock = socket.create_connection((url.hostname, url.port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Version: 13\r\nOrigin: {base}\r\n\r\n"
            ).encode()
        )
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._read()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        return chunk

    def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self.buffer += self._read()
        taken, self.buffer = self.buffer[:n], self.buffer[n:]
        return taken

    def frame(self) -> tuple[int, bytes]:
        """The server's next frame: (opcode, payload); servers do not mask."""
        first, second = self._take(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack(">H", self._take(2))
        elif length == 127:
            (length,) = struct.unpack(">Q", self._take(8))
        return first & 0x0F, self._take(length)

    def send_text_header(self, length: int) -> None:
        """Announce a masked text frame of ``length`` bytes, and send none of it."""
        self.sock.sendall(bytes([0x81, 0x80 | 127]) + struct.pack(">Q", length))


def test_a_big_client_message_is_refused_before_the_server_reads_it(make_event) -> None:
    # The probe sent 10 MiB and the server took it all (uvicorn buffers up to 16 MiB per
    # message before the application sees any). Announced, not sent: only a server that
    # judges the frame by its header closes now; one that reads it would wait for the bytes.
    make_event(slug="big", heartbeat_seconds=600)
    with running_stack() as stack:
        base = stack.web(workers=1)
        ticket = request("POST", f"{base}/api/v1/events/big/join", {}).body["ticket"]
        ws = RawSocket(base, f"/ws/events/big/?ticket={ticket}")
        opcode, payload = ws.frame()
        assert opcode == 0x1 and json.loads(payload)["type"] == "snapshot"
        ws.send_text_header(10 * 1024 * 1024)
        ws.sock.settimeout(5)
        opcode, payload = ws.frame()  # no beat runs: nothing else would come
        assert opcode == 0x8  # close
        assert struct.unpack(">H", payload[:2])[0] == 1009  # message too big
        ws.sock.close()


def open_socket(base: str, slug: str, ticket: str):
    ws_url = base.replace("http://", "ws://") + f"/ws/events/{slug}/?ticket={ticket}"
    return connect(ws_url, origin=base, open_timeout=10)


def test_sixty_sockets_on_one_ticket_over_two_servers_leave_three_open(make_event) -> None:
    # The probe kept 60 sockets open on one ticket. The cap holds across web processes: two
    # servers here, the sockets alternating between them.
    event = make_event(slug="many", heartbeat_seconds=600)
    with running_stack() as one, running_stack() as other:
        bases = [one.web(workers=1), other.web(workers=1)]
        ticket = request("POST", f"{bases[0]}/api/v1/events/many/join", {}).body["ticket"]
        with ExitStack() as opened:
            pages = []
            for i in range(60):
                ws = opened.enter_context(open_socket(bases[i % 2], "many", ticket))
                pages.append(ws)
                assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
            for ws in pages[:-3]:
                assert json.loads(ws.recv(timeout=10)) == {
                    "type": "replaced",
                    "detail": "This page was opened elsewhere.",
                }
                with pytest.raises(ConnectionClosed) as closed:
                    ws.recv(timeout=10)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 4409
            assert broadcast_tick(event_id=event.id, now=timezone.now())
            for ws in pages[-3:]:
                assert json.loads(ws.recv(timeout=10))["type"] == "tick"


def test_a_page_opened_elsewhere_says_so_and_stops(make_event) -> None:
    # A short heartbeat: the page polls every few seconds when it has no socket.
    make_event(slug="tabs", capacity=0, heartbeat_seconds=10)
    with running_stack(WR_SOCKETS_PER_TICKET="1") as stack:
        base = stack.web()
        with chromium() as browser:
            context = browser.new_context(locale="en-US")  # one cookie jar: one ticket
            first, second = context.new_page(), context.new_page()
            sockets: dict[str, list[str]] = {"first": [], "second": []}
            polls: list[str] = []
            first.on("websocket", lambda ws: sockets["first"].append(ws.url))
            second.on("websocket", lambda ws: sockets["second"].append(ws.url))
            first.on("request", lambda r: "/api/v1/tickets/" in r.url and polls.append(r.url))
            first.goto(f"{base}/e/tabs/")
            first.wait_for_selector("#position")
            # Locator waits, not wait_for_function: its string predicates are eval'd in the page,
            # which the page's Content-Security-Policy may refuse (a flaky EvalError).
            first.locator("#offline").wait_for(state="hidden")
            second.goto(f"{base}/e/tabs/")
            second.wait_for_selector("#position")
            # The older page is told why, in words, and never reconnects (it would take the
            # socket back and the two pages would take turns), but keeps polling: if the newer
            # page goes away, the polls still keep the place alive.
            first.locator("#offline").wait_for(state="visible", timeout=10_000)
            assert first.inner_text("#offline").startswith("This page was opened elsewhere.")
            polls.clear()
            first.wait_for_timeout(10_500)  # past the longest reconnect delay (10 s)
            assert len(sockets["first"]) == 1
            assert polls, "the replaced page stopped keeping its ticket alive"
            assert "opened elsewhere" in first.inner_text("#offline")  # polls keep the word
            assert second.locator("#offline").is_hidden()
            # Reloading the older page takes the ticket back.
            first.reload()
            first.wait_for_selector("#position")
            second.locator("#offline").wait_for(state="visible", timeout=10_000)
            assert "opened elsewhere" in second.inner_text("#offline")
