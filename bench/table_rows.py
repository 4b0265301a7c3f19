"""The rows of `make bench`'s table, one function each: bench/run.py calls them in turn and
renders what they return. Each takes what it needs (the sizes of the run, the running stack,
the on-sales it measures) and returns its figures.

It imports the project's models: import it once Django is set up.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone

from bench import box_office, line_end, outage
from bench.environment import BIN, DB_NAME, REDIS_DB, ROOT, fresh_database, sh, stack_env
from bench.lines import (
    bulk_line,
    index_bytes_per_entry,
    new_on_sale,
    write_gate_passes,
    write_tickets,
)
from bench.load import gate_checks, hey, status_polls, to_reference, websocket_fanout, wrk
from events.models import Event
from queueing.line.admission import ManualAdmission, admission_run
from queueing.line.index_sync import hot_index_rebuild
from scripts import redis_cluster
from tests.processes import Stack, free_port, wait_until


@dataclass(frozen=True)
class Sizes:
    """How long each row measures and how long its lines are."""

    join_seconds: int
    poll_seconds: int
    big_line_fans: int
    sockets: int
    gate_passes: int
    box_office_measure_seconds: int
    box_office_idle_seconds: int
    box_office_scaling_seconds: int
    line_end_fans: int

    @classmethod
    def of(cls, *, quick: bool) -> Sizes:
        """`make bench`'s, or `make bench-quick`'s (under two minutes)."""
        if quick:
            return cls(
                join_seconds=10,
                poll_seconds=8,
                big_line_fans=100_000,
                sockets=1_000,
                gate_passes=200,
                box_office_measure_seconds=15,
                box_office_idle_seconds=10,
                box_office_scaling_seconds=8,
                line_end_fans=100_000,
            )
        return cls(
            join_seconds=60,
            poll_seconds=30,
            big_line_fans=1_000_000,
            sockets=10_000,
            gate_passes=1_000,
            box_office_measure_seconds=60,
            box_office_idle_seconds=30,
            box_office_scaling_seconds=20,
            line_end_fans=1_000_000,
        )


# ------------------------------------------------------------------ the on-sales and the stack


@dataclass(frozen=True)
class OnSales:
    """The on-sales the rows on the main stack measure, made by ``on_sales``."""

    joins: Event
    small: Event
    large: Event
    gate: Event


# The gate's on-sale holds traffic rules as a shop would (static files, probes, bots, staff
# networks), none of which matches the row's requests (bench/gate.lua): every check decides
# over all of them, then looks at the pass.
GATE_TRAFFIC_RULES: list[dict[str, Any]] = [
    {"action": "bypass", "path": ["/static/*", "/assets/*", "/favicon.ico"]},
    {"action": "bypass", "ip": ["10.0.0.0/8", "2001:db8::/32"]},
    {"action": "block", "user_agent": ["*badbot*", "*crawler*", "python-requests/*"]},
    {"action": "bypass", "header": {"x-shop-probe": "probe-secret"}},
    {"action": "bypass", "cookie": {"shop_staff": "staff-secret"}},
    {"action": "block", "ip": ["192.0.2.0/24", "2001:db8:bad::/48"]},
    {"action": "bypass", "path": ["/health"], "user_agent": ["kube-probe/*"]},
    {"action": "block", "header": {"x-evil": "1"}},
    {"action": "bypass", "ip": ["198.51.100.0/24"], "path": ["/admin/*"]},
    {"action": "block", "cookie": {"banned": "1"}},
]


def on_sales() -> OnSales:
    # Paused: the line only grows, so joins and polls are measured against a full line.
    line = {"capacity": 0, "rate_per_minute": 0, "heartbeat_seconds": 3600}
    return OnSales(
        joins=new_on_sale("joins", actor="bench", started=False, **line),
        small=new_on_sale("small", actor="bench", **line),
        large=new_on_sale("large", actor="bench", **line),
        # Admitted fans whose passes open a shop for the gate row: paused (nothing ticks it),
        # its passes valid for the whole run.
        gate=new_on_sale(
            "gate",
            actor="bench",
            capacity=0,
            rate_per_minute=0,
            session_seconds=86_400,
            traffic_rules=GATE_TRAFFIC_RULES,
        ),
    )


@dataclass(frozen=True)
class Running:
    """The stack the rows measure, up: its web server's URL and the reference app's."""

    stack: Stack
    base: str
    reference: str

    @property
    def web_pgid(self) -> int:
        # tests/processes.py starts each process in a session of its own: its pid is the
        # group's, gunicorn's workers included.
        return self.stack.procs["web"].pid


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def reference_started(stack: Stack, workers: int) -> str:
    """The reference app (bench/reference_app.py) on ``stack`` with ``workers`` workers, up;
    its URL."""
    port = free_port()
    sh("redis-cli", "-n", str(REDIS_DB), "zadd", "bench:reference", "1", "member")
    stack.start(
        "reference",
        [
            str(BIN / "uvicorn"),
            "bench.reference_app:app",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--log-level",
            "warning",
        ],
    )
    reference = f"http://127.0.0.1:{port}/"
    wait_until(lambda: _up(reference), timeout=20, what="the reference app")
    return reference


@contextmanager
def running_stack(logdir: Path, web_workers: int) -> Iterator[Running]:
    """The production stack (gunicorn with ``web_workers`` uvicorn workers, a Celery worker,
    beat) and the reference app with as many workers, logging to ``logdir``; stopped after."""
    stack = Stack(stack_env(), logdir)
    try:
        base = stack.web(workers=web_workers)
        stack.worker()
        stack.beat()
        yield Running(stack=stack, base=base, reference=reference_started(stack, web_workers))
    finally:
        stack.stop()


def reference_polls(running: Running, seconds: int) -> dict[str, Any]:
    """The reference app under the load the status and gate rows put on the room."""
    return wrk(running.reference, seconds=seconds, connections=64)


def database_emptied() -> None:
    """The benchmark's database and Redis empty again, for a row on a database of its own."""
    connection.close()
    connection.close_pool()  # its idle connections would be cut under it by the drop
    fresh_database()


# ----------------------------------------------------------------------------------- the rows


def joins(running: Running, event: Event, sizes: Sizes, rate: float) -> dict[str, Any]:
    """Joins of ``event`` over HTTP at ``rate`` a second: durable, each in PostgreSQL."""
    print(f"1. join burst: {sizes.join_seconds} s at {rate:g}/s", flush=True)
    return hey(
        f"{running.base}/api/v1/events/{event.slug}/join",
        seconds=sizes.join_seconds,
        concurrency=200,
        rate=rate,
        post=True,
    )


def status(
    running: Running, event: Event, tickets: Path, sizes: Sizes
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Status polls of ``event``'s fans (tickets written to ``tickets``), then the reference
    app under the same load: the status row and the reference row."""
    print(f"2. status polling: {sizes.poll_seconds} s, and the reference", flush=True)
    write_tickets(event.pk, tickets)
    polls = status_polls(running.base, tickets, seconds=sizes.poll_seconds)
    reference = reference_polls(running, sizes.poll_seconds)
    polls["ratio_to_reference"] = to_reference(polls, reference)
    return polls, reference


def cluster_polls(
    logdir: Path, event: Event, tickets: Path, *, seconds: int, web_workers: int
) -> dict[str, Any]:
    """The status row again with the hot index on a loopback Redis Cluster (3 masters, 3
    replicas): ``event``'s line, rebuilt into the cluster, polled through a second web
    server with the tickets in ``tickets``."""
    cluster = redis_cluster.start()
    try:
        env = {
            **stack_env(),
            "REDIS_URL": cluster.seeds,
            "REDIS_CLUSTER": "1",
            "CHANNELS_REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
            "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        }
        sh(str(BIN / "python"), "manage.py", "rebuild_hot_queue", event.slug, cwd=ROOT, env=env)
        (logdir / "cluster").mkdir(exist_ok=True)
        stack = Stack(env, logdir / "cluster")
        try:
            base = stack.web(workers=web_workers)
            result = status_polls(base, tickets, seconds=seconds)
        finally:
            stack.stop()
    finally:
        redis_cluster.stop(cluster)
    return result


def cluster_status(
    logdir: Path,
    event: Event,
    tickets: Path,
    sizes: Sizes,
    *,
    web_workers: int,
    reference: dict[str, Any],
) -> dict[str, Any]:
    """The cluster status row: the status row's line and tickets (``event``, ``tickets``)."""
    print(f"2b. status polling on a Redis Cluster: {sizes.poll_seconds} s", flush=True)
    result = cluster_polls(
        logdir, event, tickets, seconds=sizes.poll_seconds, web_workers=web_workers
    )
    result["ratio_to_reference"] = to_reference(result, reference)
    return result


def gate(
    running: Running, event: Event, logdir: Path, sizes: Sizes, reference: dict[str, Any]
) -> dict[str, Any]:
    """The gate row: checks of passes to ``event``'s shop."""
    print(f"2c. gate checks (nginx auth_request): {sizes.poll_seconds} s", flush=True)
    passes = logdir / "passes.txt"
    write_gate_passes(event, passes, count=sizes.gate_passes)
    result = gate_checks(running.base, passes, slug=event.slug, seconds=sizes.poll_seconds)
    result["ratio_to_reference"] = to_reference(result, reference)
    return result


def admission_tick_ms(event_id: int, runs: int = 5) -> float:
    """Median wall time of one admission run that admits a full batch of 100.

    The event is paused (so beat leaves it alone); a manual admission runs the same code with
    a fixed batch."""
    batch = ManualAdmission(count=100, actor="bench")
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        outcome = admission_run(event_id=event_id, now=timezone.now(), manual=batch)
        times.append((time.perf_counter() - started) * 1000)
        assert outcome.admitted, outcome
    return sorted(times)[len(times) // 2]


def big_line(running: Running, on_sales: OnSales, tickets: Path, sizes: Sizes) -> dict[str, Any]:
    """The big line row: ``sizes.big_line_fans`` fans waiting in the large on-sale against 1,000 in
    the small one (loading, Redis bytes, status polls and admission ticks at that size)."""
    big, small, large = sizes.big_line_fans, on_sales.small, on_sales.large
    print(f"4. big line: {big:,} waiting fans vs 1,000", flush=True)
    bulk_line(small, 1_000)
    started = time.perf_counter()
    bulk_line(large, big)
    copy_s = time.perf_counter() - started
    started = time.perf_counter()
    for event in (small, large):
        assert hot_index_rebuild(event_id=event.pk)
    rebuild_s = time.perf_counter() - started
    write_tickets(large.pk, tickets)
    line = {
        "fans": big,
        "copy_s": round(copy_s, 1),
        "index_rebuild_s": round(rebuild_s, 1),
        "redis_bytes_per_entry": round(index_bytes_per_entry(large.pk, big), 1),
        "status_at_size": status_polls(running.base, tickets, seconds=sizes.poll_seconds),
        "admission_tick_ms_1k": round(admission_tick_ms(small.pk), 1),
        "admission_tick_ms_big": round(admission_tick_ms(large.pk), 1),
    }
    line["admission_tick_ratio"] = round(
        line["admission_tick_ms_big"] / line["admission_tick_ms_1k"], 2
    )
    return line


def websockets(running: Running, event: Event, tickets: Path, sockets: int) -> dict[str, Any]:
    """The WebSocket row: ``sockets`` waiting pages of ``event``'s fans, open at once."""
    print(f"3. WebSocket fan-out: {sockets:,} sockets", flush=True)
    write_tickets(event.pk, tickets, limit=sockets)
    return websocket_fanout(running.base, event.slug, tickets, sockets, running.web_pgid)


def redis_outage(logdir: Path, sizes: Sizes, web_workers: int) -> dict[str, Any]:
    """The Redis outage row (bench/outage.py), on an on-sale of its own."""
    event = new_on_sale(
        "outage", actor="bench", capacity=0, rate_per_minute=0, heartbeat_seconds=600
    )
    fans = sizes.big_line_fans
    print(f"6. Redis outage: {fans:,} waiting, status polls with Redis up then stopped", flush=True)
    return outage.run(
        event=event,
        fans=fans,
        env=stack_env(),
        logdir=logdir,
        seconds=sizes.poll_seconds,
        web_workers=web_workers,
        database=DB_NAME,
    )


def line_end_row(logdir: Path, sizes: Sizes) -> dict[str, Any]:
    """The line-end row (bench/line_end.py): a line closed and revoked by worker and beat."""
    fans = sizes.line_end_fans
    print(f"7. Line end: {fans:,} waiting, the on-sale closed, revoked by the worker", flush=True)
    return line_end.run(fans=fans, logdir=logdir)


def box_office_rows(logdir: Path, sizes: Sizes) -> dict[str, Any]:
    """The box office rows (bench/box_office.py), each on stacks of its own."""

    def box_office_stack(name: str) -> Stack:
        # Celery's own INFO lines (one per finished task) are what the scaling row counts.
        (logdir / name).mkdir()
        return Stack(stack_env(), logdir / name)

    return box_office.run(
        box_office_stack,
        measure_seconds=sizes.box_office_measure_seconds,
        idle_seconds=sizes.box_office_idle_seconds,
        scaling_seconds=sizes.box_office_scaling_seconds,
    )


def far_back(logdir: Path, sizes: Sizes) -> dict[str, Any]:
    """The far-back row (bench/far_back.py, on a database and Redis servers of its own): pages
    spread over a line of ``sizes.big_line_fans``, before and after, in the same run."""
    sockets, seconds = sizes.sockets * 6 // 10, 2 * sizes.poll_seconds
    print(f"7. far-back pages: {sockets:,} sockets over {sizes.big_line_fans:,} fans", flush=True)
    out = logdir / "far_back.json"
    sh(
        str(BIN / "python"),
        str(ROOT / "bench" / "far_back.py"),
        *("--fans", str(sizes.big_line_fans), "--sockets", str(sockets)),
        *("--seconds", str(seconds), "--out", str(out)),
        cwd=ROOT,
    )
    return json.loads(out.read_text())


# ------------------------------------------------- one row alone, to compare a change (--*-only)


def websockets_alone(running: Running, event: Event, tickets: Path, sockets: int) -> dict[str, Any]:
    """The WebSocket row alone (for profiling it): ``event``'s line first loaded."""
    bulk_line(event, sockets)
    assert hot_index_rebuild(event_id=event.pk)
    return websockets(running, event, tickets, sockets)


def gate_rounds(running: Running, event: Event, logdir: Path, sizes: Sizes, rounds: int) -> None:
    """The gate row and the reference, ``rounds`` times, a line of JSON each."""
    passes = logdir / "passes.txt"
    write_gate_passes(event, passes)
    for _ in range(rounds):
        row = gate_checks(running.base, passes, slug=event.slug, seconds=sizes.poll_seconds)
        reference = reference_polls(running, sizes.poll_seconds)
        print(
            json.dumps(
                {
                    "gate": {
                        "requests_per_s": row["requests_per_s"],
                        "p99_ms": row["p99_ms"],
                        "statuses": row.get("statuses"),
                        "to_reference": to_reference(row, reference),
                    },
                    "reference": {
                        "requests_per_s": reference["requests_per_s"],
                        "p99_ms": reference["p99_ms"],
                    },
                }
            ),
            flush=True,
        )


def status_rounds(
    running: Running,
    event: Event,
    logdir: Path,
    sizes: Sizes,
    *,
    rounds: int,
    web_workers: int,
) -> None:
    """The status rows (single Redis, reference, cluster) on a line of 60,000, ``rounds``
    times, a line of JSON each."""
    bulk_line(event, 60_000)
    assert hot_index_rebuild(event_id=event.pk)
    tickets = logdir / "tickets.txt"
    write_tickets(event.pk, tickets)
    seconds = sizes.poll_seconds
    for _ in range(rounds):
        rows = {
            "status": status_polls(running.base, tickets, seconds=seconds),
            "reference": reference_polls(running, seconds),
            "cluster_status": cluster_polls(
                logdir, event, tickets, seconds=seconds, web_workers=web_workers
            ),
        }
        print(
            json.dumps(
                {
                    name: {
                        "requests_per_s": row["requests_per_s"],
                        "p99_ms": row["p99_ms"],
                        "to_reference": to_reference(row, rows["reference"]),
                    }
                    for name, row in rows.items()
                }
            ),
            flush=True,
        )
