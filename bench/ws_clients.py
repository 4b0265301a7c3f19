"""Opens many waiting-page sockets and records, for every tick, how long after its broadcast
("at") each socket received it. Prints one JSON line: {"opened", "failed", "delays": {at: [s]}}.

Run: python bench/ws_clients.py WS_URL ORIGIN TICKETS_FILE FIRST COUNT SECONDS
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


async def main(url: str, origin: str, tickets: list[str], seconds: float) -> None:
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
    print(
        json.dumps(
            {
                "opened": len(opened),
                "failed": len(failed),
                "delays": {str(at): d for at, d in delays.items()},
            }
        )
    )


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ws_url, origin, path, first, count, seconds = sys.argv[1:7]
    with open(path) as handle:
        lines = [line.strip() for line in handle if line.strip()]
    chosen = lines[int(first) : int(first) + int(count)]
    asyncio.run(main(ws_url, origin, chosen, float(seconds)))
