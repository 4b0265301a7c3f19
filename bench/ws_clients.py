"""Opens many waiting-page sockets, waits until all of them are open, then records for
`SECONDS` how long after its broadcast ("at") each socket received each tick.

Writes one JSON object to OUT_FILE: {"opened", "failed", "measured_from", "delays": {at: [s]}}
(a file, not stdout: the report outgrows a pipe's buffer, and the parent reads it only after
every client is done). Only ticks broadcast after `measured_from` (when this client's last
socket opened) are recorded: the ramp-up is not the steady state being measured.

Run: python bench/ws_clients.py WS_URL ORIGIN TICKETS_FILE FIRST COUNT SECONDS OUT_FILE
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
import sys
import time
from collections import defaultdict

from websockets.asyncio.client import connect

# The tick's broadcast time, read without parsing the whole message (the clients share the
# machine with the server: their CPU is the server's loss).
_AT = re.compile(r'"at":([0-9.]+)')


class Run:
    def __init__(self, total: int, seconds: float) -> None:
        self.total = total
        self.seconds = seconds
        self.opened = 0
        self.failed = 0
        self.all_open = asyncio.Event()
        self.measured_from = 0.0
        self.delays: dict[float, list[float]] = defaultdict(list)

    def settled(self) -> None:
        if self.opened + self.failed == self.total and not self.all_open.is_set():
            self.measured_from = time.time()
            self.all_open.set()


async def watch(url: str, origin: str, run: Run) -> None:
    try:
        async with connect(
            url, origin=origin, open_timeout=120, ping_interval=None, close_timeout=2
        ) as socket:
            run.opened += 1
            run.settled()
            # Read all along (a socket left unread stops answering the server's pings and
            # is closed); record once every socket is open, for `seconds`.
            while not run.all_open.is_set() or time.time() < run.measured_from + run.seconds:
                try:
                    raw = await asyncio.wait_for(socket.recv(), timeout=1)
                except TimeoutError:
                    continue
                received = time.time()
                if (
                    run.all_open.is_set()
                    and isinstance(raw, str)
                    and raw.startswith('{"type":"tick"')
                ):
                    at = float(_AT.search(raw).group(1))
                    if at >= run.measured_from:
                        run.delays[at].append(received - at)
    except Exception:  # noqa: BLE001  counted, not fatal: the report says how many failed
        run.failed += 1
        run.settled()


async def main(url: str, origin: str, tickets: list[str], seconds: float, out: str) -> None:
    run = Run(len(tickets), seconds)
    tasks = []
    for ticket in tickets:
        tasks.append(asyncio.create_task(watch(f"{url}?ticket={ticket}", origin, run)))
        await asyncio.sleep(0.002)  # ramp up rather than stampede the handshakes
    await asyncio.gather(*tasks)
    report = {
        "opened": run.opened,
        "failed": run.failed,
        "measured_from": run.measured_from,
        "delays": {str(at): d for at, d in run.delays.items()},
    }
    with open(out, "w") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ws_url, origin, path, first, count, seconds, out_file = sys.argv[1:8]
    with open(path) as handle:
        lines = [line.strip() for line in handle if line.strip()]
    chosen = lines[int(first) : int(first) + int(count)]
    asyncio.run(main(ws_url, origin, chosen, float(seconds), out_file))
