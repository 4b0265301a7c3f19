"""Opens many waiting-page sockets, waits until all of them are open, then records for
`SECONDS` how long after its broadcast ("at") each socket received each tick.

A minimal WebSocket client on asyncio's protocol API: handshake, unmasked server frames,
pong for ping. The load generator shares the machine with the server, so it must cost
little per message, as wrk and hey do for HTTP (a full client library spent about as much CPU
receiving the ticks as the server spent sending them).

Writes one JSON object to OUT_FILE: {"opened", "failed", "measured_from", "delays": {at: [s]},
"per_socket": {index: [[at, delay], ...]}} (a file, not stdout: the report outgrows a pipe's
buffer). Only ticks broadcast after `measured_from` (when this client's last socket opened) are
recorded; `per_socket` lists the ticks each socket was sent, by its ticket's index in
TICKETS_FILE (pages are sent ticks by their distance from the front).

Run: python bench/ws_clients.py WS_URL ORIGIN TICKETS_FILE FIRST COUNT SECONDS OUT_FILE
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import os
import re
import resource
import struct
import sys
import time
from collections import defaultdict
from urllib.parse import urlsplit

_AT = re.compile(rb'"at":([0-9.]+)')
_TICK = b'{"type":"tick"'


class Run:
    def __init__(self, total: int) -> None:
        self.total = total
        self.opened = 0
        self.failed = 0
        self.all_open = asyncio.Event()
        self.measured_from = 0.0
        self.delays: dict[float, list[float]] = defaultdict(list)
        self.per_socket: dict[int, list[tuple[float, float]]] = {}

    def settled(self) -> None:
        if self.opened + self.failed == self.total and not self.all_open.is_set():
            self.measured_from = time.time()
            self.all_open.set()


class PageSocket(asyncio.Protocol):
    def __init__(
        self,
        run: Run,
        request: bytes,
        opened: asyncio.Future[None],
        ats: list[tuple[float, float]],
    ) -> None:
        self.run = run
        self.ats = ats  # the ticks this socket was sent: their "at", and how late they came
        self.request = request
        self.opened = opened
        self.buffer = b""
        self.upgraded = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(ConnectionError("closed during the handshake"))

    def data_received(self, data: bytes) -> None:
        received = time.time()
        self.buffer += data
        if not self.upgraded:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            if not head.startswith(b"HTTP/1.1 101"):
                self.opened.set_exception(ConnectionError(head.split(b"\r\n")[0].decode()))
                return
            self.upgraded, self.buffer = True, rest
            self.opened.set_result(None)
        self._frames(received)

    def _frames(self, received: float) -> None:
        buffer = self.buffer
        while len(buffer) >= 2:
            opcode, length = buffer[0] & 0x0F, buffer[1] & 0x7F
            start = 2
            if length == 126:
                if len(buffer) < 4:
                    break
                (length,) = struct.unpack("!H", buffer[2:4])
                start = 4
            elif length == 127:
                if len(buffer) < 10:
                    break
                (length,) = struct.unpack("!Q", buffer[2:10])
                start = 10
            if len(buffer) < start + length:
                break
            payload = buffer[start : start + length]
            buffer = buffer[start + length :]
            if opcode == 0x1 and payload.startswith(_TICK) and self.run.all_open.is_set():
                at = float(_AT.search(payload).group(1))
                if at >= self.run.measured_from:
                    self.run.delays[at].append(received - at)
                    self.ats.append((at, received - at))
            elif opcode == 0x9:  # ping: answer, or the server closes the socket
                self._send(0xA, payload)
        self.buffer = buffer

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        assert self.transport is not None and len(payload) < 126
        self.transport.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)


def _upgrade_request(url: str, origin: str) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {parts.path}?{parts.query} HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {origin}\r\n\r\n"
    )
    return parts.hostname or "127.0.0.1", parts.port or 80, request.encode()


# Past ~28,000 sockets one source address runs out of ephemeral ports: each block of
# sockets connects from an address of its own (all of 127.0.0.0/8 is loopback).
SOCKETS_PER_SOURCE_ADDRESS = 20_000


async def watch(url: str, origin: str, run: Run, seconds: float, index: int) -> None:
    host, port, request = _upgrade_request(url, origin)
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[None] = loop.create_future()
    transport = None
    source = f"127.0.0.{1 + index // SOCKETS_PER_SOURCE_ADDRESS}"
    ats = run.per_socket[index] = []
    try:
        transport, _ = await loop.create_connection(
            lambda: PageSocket(run, request, opened, ats), host, port, local_addr=(source, 0)
        )
        await asyncio.wait_for(opened, timeout=120)
        run.opened += 1
    except Exception:  # noqa: BLE001  counted, not fatal: the report says how many failed
        run.failed += 1
        if transport is not None:
            transport.close()
        run.settled()
        return
    run.settled()
    await run.all_open.wait()
    await asyncio.sleep(max(0.0, run.measured_from + seconds - time.time()))
    transport.close()


async def main(
    url: str, origin: str, tickets: list[str], first: int, seconds: float, out: str
) -> None:
    run = Run(len(tickets))
    tasks = []
    for index, ticket in enumerate(tickets, start=first):
        page = f"{url}?ticket={ticket}"
        tasks.append(asyncio.create_task(watch(page, origin, run, seconds, index)))
        await asyncio.sleep(0.002)  # ramp up rather than stampede the handshakes
    await asyncio.gather(*tasks)
    report = {
        "opened": run.opened,
        "failed": run.failed,
        "measured_from": run.measured_from,
        "delays": {str(at): d for at, d in run.delays.items()},
        "per_socket": {str(index): ats for index, ats in run.per_socket.items()},
    }
    with open(out, "w") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    # A collector pass over ten thousand sockets' objects would stall the client and be
    # measured as the server's delay; the client lives half a minute and frees little.
    gc.disable()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ws_url, origin, path, first, count, seconds, out_file = sys.argv[1:8]
    with open(path) as handle:
        lines = [line.strip() for line in handle if line.strip()]
    chosen = lines[int(first) : int(first) + int(count)]
    asyncio.run(main(ws_url, origin, chosen, int(first), float(seconds), out_file))
