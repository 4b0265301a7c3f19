"""Opens many waiting-page sockets and records, for every tick, how long after its broadcast
("at") each socket received it. Writes one JSON object to OUT_FILE:
{"opened", "failed", "delays": {at: [s]}} (a file, not stdout: the report outgrows a pipe's
buffer, and the parent reads it only after every client is done).

Run: python bench/ws_clients.py WS_URL ORIGIN TICKETS_FILE FIRST COUNT SECONDS OUT_FILE
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections import defaultdict

from websockets.asyncio.client import connect


async def watch(
    url: str,
    origin: str,
    delays: dict[float, list[float]],
    until: float,
    opened: list[int],
    failed: list[int],
) -> None:
    try:
        async with connect(url, origin=origin, open_timeout=60, ping_interval=None) as socket:
            opened.append(1)
            while time.time() < until:
                left = max(0.1, until - time.time())
                try:
                    raw = await asyncio.wait_for(socket.recv(), timeout=left)
                except TimeoutError:
                    break
                received = time.time()
                message = json.loads(raw)
                if message.get("type") == "tick":
                    delays[message["at"]].append(received - message["at"])
    except Exception:  # noqa: BLE001  counted, not fatal: the report says how many failed
        failed.append(1)


async def main(url: str, origin: str, tickets: list[str], seconds: float, out: str) -> None:
    delays: dict[float, list[float]] = defaultdict(list)
    opened: list[int] = []
    failed: list[int] = []
    until = time.time() + seconds
    tasks = []
    for ticket in tickets:
        tasks.append(
            asyncio.create_task(
                watch(f"{url}?ticket={ticket}", origin, delays, until, opened, failed)
            )
        )
        await asyncio.sleep(0.002)  # ramp up rather than stampede the handshakes
    await asyncio.gather(*tasks)
    report = {
        "opened": len(opened),
        "failed": len(failed),
        "delays": {str(at): d for at, d in delays.items()},
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
