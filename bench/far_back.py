"""Far-back pages on a long line (issue 30): what an open waiting page costs its web process
and the on-sale's Redis slot per second, with ticks sent by distance from the front, the
keep-alive at a third of the heartbeat and pings every 60 s, against the room as it was before
(`REFERENCE_COMMIT`: every tick to every page, a keep-alive every 5 s with one deadline for
all of a process's tickets, pings every 20 s), measured in the same run.

    python bench/far_back.py [--fans 1000000] [--sockets 4000] [--seconds 60] [--out FILE]

`make bench` runs it as one of its rows (bench/run.py). On a database of its own
(`waitingroom_farback`) and two private redis-servers: the hot index alone on one (its
`INFO commandstats` then counts this room's keep-alive only), the channel layer and Celery's
broker on the other.

1. One on-sale, paused (the line stays as it is; the beat still ticks it every second), with
   `--fans` waiting fans loaded by COPY and rebuilt into the hot index. Their heartbeat
   deadlines are then moved a day ahead, as if they polled, so nobody expires meanwhile.
2. `--sockets` real waiting-page sockets (bench/ws_clients.py) on one web process, their fans
   spread evenly over the line: on a line of 1,000,000, 1% of them in the front band (10,000
   places), 9% in the next, 90% far back. Real sockets, not simulated ones: a few thousand
   stand for the million, since what is measured is per socket.
3. Two runs, each on a fresh stack (web, worker, beat), the on-sale's heartbeat the default
   60 s in both:
   - *before*: the stack run from `REFERENCE_COMMIT`'s tree (`git archive`), the room's code
     before this change;
   - *after*: the stack run from this tree, with the room's defaults.
   The window runs from one keep-alive write of the web process to the last one within
   `--seconds` (so it holds whole keep-alive periods): the web process group's CPU from
   /proc, the hot index's `ZADD` time (the keep-alive is the only ZADD of the window) and its
   whole CPU, per socket-second.
4. From the clients: the ticks each socket was sent, by band: the longest gap, and for the
   front band how long after its broadcast each tick arrived.

Writes one JSON object to `--out` (default bench/far_back.json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.environment import ENV, fresh_database, machine  # noqa: E402
from bench.meters import (  # noqa: E402
    CpuWindow,
    PrivateRedis,
    command_seconds,
    established,
    redis_spent,
)

DB_NAME = "waitingroom_farback"
REDIS_DB = 12
PREFIX = "farback"
LOGDIR = ROOT / ".run" / "far_back"
CLIENTS = 2
HEARTBEAT = 60
# The last commit before far-back pages cost less (issue 30): the reference's code.
REFERENCE_COMMIT = "7972eb29168c02871b98542034bde075c98c085f"
REFERENCE_KEEPALIVE_SECONDS = 5.0  # what its queueing/live/watchers.py wrote at any heartbeat


def reference_tree() -> Path:
    """``REFERENCE_COMMIT``'s files, unpacked beside the run's logs."""
    tree = LOGDIR / "reference"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", REFERENCE_COMMIT], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def far_back_env(hot: PrivateRedis, aux: PrivateRedis) -> dict[str, str]:
    return {
        **ENV,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
        "REDIS_URL": hot.url(REDIS_DB),
        "CHANNELS_REDIS_URL": aux.url(REDIS_DB),
        "CELERY_BROKER_URL": aux.url(REDIS_DB),
        "WR_REDIS_PREFIX": PREFIX,
        "CHANNELS_PREFIX": f"{PREFIX}:asgi",
        "CELERY_TASK_DEFAULT_QUEUE": PREFIX,
        "PYTHONUNBUFFERED": "1",
    }


def deadlines_ahead(client: redis.Redis, key: str, *, by: float) -> None:
    """Every heartbeat deadline of the on-sale moved ``by`` seconds ahead, a chunk at a time
    (a chunk moved goes behind the rest, so the next chunk is again the soonest)."""
    script = client.register_script(
        "local m = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 10000)\n"
        "for i = 1, #m do redis.call('ZINCRBY', KEYS[1], ARGV[2], m[i]) end\n"
        "return #m"
    )
    cutoff = time.time() + by / 2
    while script(keys=[key], args=[cutoff, by]):
        pass


def keepalive_rounds(hot: PrivateRedis) -> int:
    return hot.reading().calls.get("zadd", 0)


def next_round(hot: PrivateRedis, after: int, *, timeout: float) -> int:
    """Waits for the web process's next keep-alive write; the ZADD count then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        calls = keepalive_rounds(hot)
        if calls > after:
            return calls
        time.sleep(0.1)
    raise AssertionError("no keep-alive write")


def measured_run(
    name: str,
    *,
    event: Any,
    env: dict[str, str],
    hot: PrivateRedis,
    tickets: Path,
    sockets: int,
    seconds: int,
    pace: float,
    root: Path = ROOT,
) -> dict[str, Any]:
    from bench.load import ws_clients_start
    from queueing.hot import keys
    from tests.processes import Stack, wait_until

    (LOGDIR / name).mkdir()
    stack = Stack(env, LOGDIR / name, root=root)
    periods = max(1, round(seconds / pace))
    try:
        base = stack.web(workers=1)
        stack.worker(concurrency=1)
        stack.beat()
        web = stack.procs["web"].pid
        port = int(base.rsplit(":", 1)[1])
        hold = 30 + pace * (periods + 2)
        clients = ws_clients_start(
            base, event.slug, tickets, sockets, clients=CLIENTS, hold=int(hold)
        )
        db = redis.Redis(port=hot.port, db=REDIS_DB)
        counted = keys.ticket_sockets(event.pk, 0).removesuffix("0") + "*"
        wait_until(lambda: established(port) >= sockets, timeout=180, what="sockets")
        # Open once counted on its ticket (after its snapshot), not at TCP connect.
        opened, last_change = 0, time.monotonic()
        while opened < sockets and time.monotonic() - last_change < 30:
            time.sleep(1)
            now_open = sum(1 for _ in db.scan_iter(match=counted, count=1000))
            if now_open != opened:
                opened, last_change = now_open, time.monotonic()
        print(f"  {opened:,} of {sockets:,} sockets open", flush=True)
        # From one keep-alive write to the last one of the window: whole periods.
        calls = next_round(hot, keepalive_rounds(hot), timeout=2 * pace + 5)
        hot_before = hot.reading()
        with CpuWindow({"web": web}) as cpu:
            for _ in range(periods):
                calls = next_round(hot, calls, timeout=2 * pace + 5)
        hot_after = hot.reading()
        for client in clients:
            client.wait(timeout=hold + 120)
    finally:
        stack.stop()
    _, redis_cpu = redis_spent(hot_before, hot_after)
    keepalive = command_seconds(hot_before, hot_after, "zadd")
    per_socket_second = opened * cpu.seconds
    return {
        "sockets_open": opened,
        "window_s": round(cpu.seconds, 1),
        "keepalive_writes": periods,
        "web_cpu_us_per_socket_second": round(cpu.spent["web"] * 1e6 / per_socket_second, 2),
        "keepalive_us_per_socket_second": round(keepalive * 1e6 / per_socket_second, 4),
        "hot_redis_cpu_us_per_socket_second": round(redis_cpu * 1e6 / per_socket_second, 3),
        "ticks": ticks_by_band(tickets.parent, positions_of(tickets)),
    }


def positions_of(tickets: Path) -> list[int]:
    return json.loads(tickets.with_suffix(".positions.json").read_text())


def ticks_by_band(folder: Path, positions: list[int]) -> dict[str, Any]:
    """Per band: ticks per socket-second, the longest gap between two ticks of one socket,
    and how long after its broadcast a tick reached the page (p99, max)."""
    from django.conf import settings

    from bench.load import percentile

    front = settings.WR_TICKS_FRONT_PLACES
    reports = [json.loads((folder / f"ws-report-{i}.json").read_text()) for i in range(CLIENTS)]
    start = max(report["measured_from"] for report in reports)
    last = max((at for r in reports for s in r["per_socket"].values() for at, _ in s), default=0)
    span = max(1.0, last - start)
    bands: dict[str, dict[str, Any]] = {}
    for report in reports:
        for index, ticks in report["per_socket"].items():
            position = positions[int(index)]
            band = "front" if position <= front else "near" if position <= 10 * front else "far"
            seen = sorted((at, delay) for at, delay in ticks if at >= start)
            entry = bands.setdefault(band, {"sockets": 0, "ticks": 0, "gaps": [], "delays": []})
            entry["sockets"] += 1
            entry["ticks"] += len(seen)
            entry["gaps"].extend(b[0] - a[0] for a, b in pairwise(seen))
            entry["delays"].extend(delay for _, delay in seen)
    return {
        band: {
            "sockets": entry["sockets"],
            "ticks_per_socket_second": round(entry["ticks"] / entry["sockets"] / span, 3),
            "longest_gap_s": round(max(entry["gaps"], default=0.0), 2),
            "delay_p99_ms": round(percentile(entry["delays"], 99) * 1000)
            if entry["delays"]
            else None,
            "delay_max_ms": round(max(entry["delays"]) * 1000) if entry["delays"] else None,
        }
        for band, entry in sorted(bands.items())
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fans", type=int, default=1_000_000)
    parser.add_argument("--sockets", type=int, default=4_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "far_back.json")
    options = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    started = time.monotonic()
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": f"python bench/far_back.py --fans {options.fans} --sockets "
        f"{options.sockets} --seconds {options.seconds}",
        "machine": machine(),
        "load_average_before": [round(v, 2) for v in os.getloadavg()],
        "fans": options.fans,
        "sockets": options.sockets,
    }
    hot, aux = PrivateRedis("far-hot"), PrivateRedis("far-aux")
    try:
        env = far_back_env(hot, aux)
        os.environ.update(env)
        fresh_database(DB_NAME, env)
        import django

        django.setup()
        result.update(measure(hot, env, options))
    finally:
        hot.stop()
        aux.stop()
    result["seconds"] = round(time.monotonic() - started)
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2), flush=True)


def measure(hot: PrivateRedis, env: dict[str, str], options: argparse.Namespace) -> dict[str, Any]:
    import shutil

    from bench.lines import bulk_line, new_on_sale
    from queueing.hot import keys
    from queueing.line.index_sync import hot_index_rebuild
    from queueing.models import QueueEntry
    from queueing.rules.layout import keepalive_seconds
    from queueing.rules.ticket_codec import TicketRef, ticket_issue

    shutil.rmtree(LOGDIR, ignore_errors=True)
    LOGDIR.mkdir(parents=True)
    event = new_on_sale(
        "far", actor="bench", capacity=0, rate_per_minute=0, heartbeat_seconds=HEARTBEAT
    )
    print(f"far back: {options.fans:,} fans loaded and indexed", flush=True)
    bulk_line(event, options.fans)
    assert hot_index_rebuild(event_id=event.pk)
    client = redis.Redis(port=hot.port, db=REDIS_DB)
    deadlines_ahead(client, keys.heartbeats(event.pk), by=86_400)
    # The sockets' fans, spread evenly over the line (single tier, paused: rank = order).
    rows = list(
        QueueEntry.objects.filter(event_id=event.pk, status="waiting")
        .order_by("order_key")
        .values_list("id", "tier_id")
    )
    step = len(rows) // options.sockets
    chosen = range(0, step * options.sockets, step)
    tickets = LOGDIR / "tickets.txt"
    tickets.write_text(
        "".join(
            ticket_issue(TicketRef(entry_id=rows[i][0], event_id=event.pk, tier_id=rows[i][1]))
            + "\n"
            for i in chosen
        )
    )
    tickets.with_suffix(".positions.json").write_text(json.dumps([i + 1 for i in chosen]))
    out: dict[str, Any] = {"reference_commit": REFERENCE_COMMIT}
    for name, root, pace in (
        ("before", reference_tree(), REFERENCE_KEEPALIVE_SECONDS),
        ("after", ROOT, keepalive_seconds(HEARTBEAT)),
    ):
        print(f"far back, {name}: {options.sockets:,} sockets", flush=True)
        out[name] = measured_run(
            name,
            event=event,
            env=env,
            hot=hot,
            tickets=tickets,
            sockets=options.sockets,
            seconds=options.seconds,
            pace=pace,
            root=root,
        )
        # The sockets' fans seen again a day ahead: none expires during the next run.
        deadlines_ahead(client, keys.heartbeats(event.pk), by=86_400)
    before, after = out["before"], out["after"]
    out["web_ratio"] = round(
        before["web_cpu_us_per_socket_second"] / after["web_cpu_us_per_socket_second"], 2
    )
    out["slot_ratio"] = round(
        before["keepalive_us_per_socket_second"] / after["keepalive_us_per_socket_second"], 2
    )
    return out


if __name__ == "__main__":
    main()
