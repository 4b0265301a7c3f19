"""The Redis outage row of `make bench` (issue 18): a line of a million, polled with the hot
index's Redis up, then stopped, then back.

The hot index gets a redis-server of its own (the fault tests' ``RedisServer``, no
persistence), so stopping it leaves the broker and the channel layer (the benchmark's Redis)
running, as production's RabbitMQ would. Figures:

- status polls per second and p99 with Redis up and with it stopped, from the same sample of
  tickets spread over the whole line (wrk, bench/status.lua), and what a degraded answer
  says (``approximate``, ``X-Poll-After-Seconds``);
- the CPU PostgreSQL's backends of the benchmark's database spent during each (bench/meters.py
  ``CpuWindow``: /proc of the backends, not the shared server's totals);
- how long after Redis came back (empty) the index was whole again: the maintenance task
  notices (every 2 s) and rebuilds a million entries.
"""

from __future__ import annotations

import json
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import redis
from django.db import connection

from bench.lines import bulk_line, write_spread_tickets
from bench.load import status_polls
from bench.meters import CpuWindow
from queueing.hot import keys
from tests.faults import RedisServer
from tests.processes import Stack, wait_until


def _index_ready(probe: redis.Redis, key: str) -> bool:
    try:
        return (probe.get(key) or b"").startswith(b"ready:")
    except redis.RedisError:
        return False


def _one_answer(base: str, ticket: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/api/v1/tickets/{ticket}", timeout=10) as response:
        body = json.loads(response.read())
        return {
            "position": body["position"],
            "approximate": body["approximate"],
            "poll_after_s": float(response.headers["X-Poll-After-Seconds"]),
        }


def run(
    *,
    event: Any,
    fans: int,
    env: dict[str, str],
    logdir: Path,
    seconds: int,
    web_workers: int,
    database: str,
) -> dict[str, Any]:
    """The row, for ``event`` (paused, started, empty; ``fans`` are loaded here)."""
    bulk_line(event, fans)
    with connection.cursor() as cursor:
        # As autovacuum would have done while a line this long grew (joins are measured in
        # their own row; here a COPY made it in seconds): the planner's figures for it.
        cursor.execute("ANALYZE queueing_queueentry")
    tickets = logdir / "outage-tickets.txt"
    write_spread_tickets(event.pk, tickets)
    sample = tickets.read_text().split()[len(tickets.read_text().split()) // 2]
    workdir = Path(tempfile.mkdtemp(prefix="wr-bench-outage-"))
    hot = RedisServer(workdir)
    hot.start()
    (logdir / "outage").mkdir(exist_ok=True)
    # The hot index alone on the Redis that is stopped: Celery's broker and the channel layer
    # stay on the benchmark's own, as production's RabbitMQ would.
    stack = Stack(
        {
            **env,
            "REDIS_URL": hot.url,
            "CELERY_BROKER_URL": env["REDIS_URL"],
            "CHANNELS_REDIS_URL": env["REDIS_URL"],
        },
        logdir / "outage",
    )
    probe = redis.Redis(port=hot.port)
    epoch_key = keys.epoch(event.pk)
    result: dict[str, Any] = {"fans": fans}
    try:
        base = stack.web(workers=web_workers)
        stack.worker()
        stack.beat()
        started = time.monotonic()
        # The new Redis holds nothing: the maintenance task builds the index.
        wait_until(lambda: _index_ready(probe, epoch_key), timeout=180, what="the first index")
        result["first_build_s"] = round(time.monotonic() - started, 1)
        groups = {"web": stack.procs["web"].pid}
        with connection.cursor() as cursor:

            def polled() -> dict[str, Any]:
                """Status polls for ``seconds``, PostgreSQL's share of a core meanwhile, and
                one fan's answer after."""
                with CpuWindow(groups, cursor, database) as cpu:
                    polls = status_polls(base, tickets, seconds=seconds)
                return {
                    **polls,
                    "postgresql_cpu_pct": round(100 * cpu.spent["postgresql"] / cpu.seconds),
                    "answer": _one_answer(base, sample),
                }

            result["normal"] = polled()
            hot.kill()
            stopped_at = time.monotonic()
            result["redis_stopped"] = polled()
        result["redis_stopped"]["ratio_to_normal"] = round(
            result["redis_stopped"]["requests_per_s"] / result["normal"]["requests_per_s"], 3
        )
        result["outage_s"] = round(time.monotonic() - stopped_at, 1)
        hot.start()  # empty, as after a crash without persistence
        back = time.monotonic()
        wait_until(lambda: _index_ready(probe, epoch_key), timeout=180, what="the rebuild")
        result["whole_again_s"] = round(time.monotonic() - back, 1)
        result["after"] = _one_answer(base, sample)
    finally:
        stack.stop()
        hot.kill()
    return result
