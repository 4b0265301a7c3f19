"""The parts of bench/unit_costs.py that run the room's real processes (tests/processes.py's
Stack) and load them (wrk, bench/ws_clients.py, redis-benchmark), reading each operation's
cost from the meters in bench/meters.py.

Imported by bench/unit_costs.py once Django is set up on its own database and Redis.
"""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from django.db import connection

from bench import box_office
from bench.far_back import deadlines_ahead, keepalive_rounds, next_round
from bench.lines import bulk_line, index_bytes_per_entry, new_on_sale, write_tickets
from bench.load import websocket_fanout, wrk
from bench.meters import (
    CpuWindow,
    PrivateRedis,
    children,
    command_seconds,
    established,
    per,
    pg_sessions,
    pg_table_counters,
    redis_spent,
    rows_written,
    rss_mib,
    spread,
    table_bytes,
)
from events.models import Event
from queueing.hot import keys
from queueing.hot.client import LUA_DIR
from queueing.line.index_sync import hot_index_rebuild
from queueing.line.reads import event_layout
from queueing.models import AuditRecord, QueueEntry
from queueing.rules.layout import keepalive_seconds
from tests.processes import Stack, wait_until

ROOT = Path(__file__).resolve().parent.parent
JOIN_SECONDS, POLL_SECONDS, TICK_SECONDS, SOCKET_SECONDS = 8, 6, 10, 10
JOIN_CONNECTIONS, POLL_CONNECTIONS = 200, 64
SOCKET_SIZES = (1_000, 3_000)
SOCKETS_HEARTBEAT = 60  # the default: the keep-alive comes every 20 s
TICK_RATE_PER_MINUTE = 6_000  # 100 fans a tick
JOIN_LUA, STATUS_LUA = str(ROOT / "bench" / "join.lua"), str(ROOT / "bench" / "status.lua")


@dataclass(frozen=True)
class Rig:
    """Where the measurement runs: its Redis servers, the processes' environment, its
    database, its log directory, and how often each figure is taken."""

    hot: PrivateRedis  # the hot index alone
    aux: PrivateRedis  # Celery's broker and the channel layer
    env: dict[str, str]
    database: str
    redis_db: int
    logdir: Path
    runs: int

    def stack(self, name: str) -> Stack:
        (self.logdir / name).mkdir()
        return Stack(self.env, self.logdir / name)


def on_sale(slug: str, *, paused: bool = True, fans: int = 0, **fields: Any) -> Event:
    """An on-sale whose line has started; paused (the line only grows) unless told otherwise;
    ``fans`` waiting fans loaded in one COPY, with their hot index."""
    fields = {
        "capacity": 0,
        "rate_per_minute": 0,
        "heartbeat_seconds": 3600,
        "session_seconds": 3600,
        **fields,
    }
    event = new_on_sale(slug, actor="units", paused=paused, **fields)
    if fans:
        bulk_line(event, fans)
        assert hot_index_rebuild(event_id=event.pk)
    return Event.objects.get(pk=event.pk)


def line_emptied(*event_ids: int) -> None:
    """Nobody left in these on-sales: the beat stops ticking them."""
    QueueEntry.objects.filter(event_id__in=event_ids).delete()


# ---------------------------------------------------------------------------- ticks


def tick_costs(rig: Rig) -> dict[str, Any]:
    """One on-sale admitting 100 fans a tick, beat and one worker process: per tick."""
    event = on_sale("ticking", paused=False, fans=3_000, rate_per_minute=TICK_RATE_PER_MINUTE)
    admitted = QueueEntry.objects.filter(event_id=event.pk, admitted_at__isnull=False)
    cursor = connection.cursor()
    rows_before = pg_table_counters(cursor)
    stack = rig.stack("ticks")
    try:
        worker, beat = stack.worker(concurrency=1), stack.beat()
        time.sleep(5)  # started, first ticks run
        since, fans_before = dt.datetime.now(), admitted.count()
        hot_before, aux_before = rig.hot.reading(), rig.aux.reading()
        sessions_before = pg_sessions(cursor, rig.database)
        # No PostgreSQL backend CPU here: Celery closes a prefork worker's connection pool
        # after every task, so each task's backend is gone before it could be read.
        with CpuWindow({"worker": worker.pid, "beat": beat.pid}) as cpu:
            time.sleep(TICK_SECONDS)
        hot_calls, hot_cpu = redis_spent(hot_before, rig.hot.reading())
        aux_calls, _ = redis_spent(aux_before, rig.aux.reading())
        sessions = pg_sessions(cursor, rig.database) - sessions_before
        until, fans_in_window = dt.datetime.now(), admitted.count() - fans_before
        time.sleep(1)  # its last log lines written
        ticks = box_office.ticks_completed([stack.log("worker")], since, until)
    finally:
        stack.stop()
    time.sleep(1)
    rows = rows_written(rows_before, pg_table_counters(cursor))
    fans = admitted.count()
    line_emptied(event.pk)
    return {
        "rate_per_minute": TICK_RATE_PER_MINUTE,
        "seconds": round(cpu.seconds, 1),
        "ticks": ticks,
        "admitted_in_window": fans_in_window,
        "worker_cpu_ms_per_tick": round(cpu.spent["worker"] * 1000 / ticks, 2),
        "beat_cpu_pct_of_core": round(100 * cpu.spent["beat"] / cpu.seconds, 2),
        # Every task of the window counted: ticks, the dispatch, the index checks.
        "postgresql_connections_per_tick": round(sessions / ticks, 2),
        "hot_redis_cpu_us_per_tick": round(hot_cpu * 1e6 / ticks, 1),
        "hot_redis_commands_per_tick": per(hot_calls, ticks),
        "broker_and_channels_commands_per_tick": per(aux_calls, ticks),
        # Over the stack's whole life: backends report their rows when they exit.
        "rows_per_admitted_fan": {
            table: {k: round(v / fans, 3) for k, v in counts.items() if v}
            for table, counts in rows.items()
        },
    }


# ---------------------------------------------------------------------------- HTTP


def _joins_run(rig: Rig, url: str, event_id: int, web_pgid: int) -> dict[str, Any]:
    entries = QueueEntry.objects.filter(event_id=event_id)
    before, hot_before = entries.count(), rig.hot.reading()
    with CpuWindow({"web": web_pgid}, connection.cursor(), rig.database) as cpu:
        load = wrk(
            url,
            seconds=JOIN_SECONDS,
            connections=JOIN_CONNECTIONS,
            script=JOIN_LUA,
            warmup_seconds=0,
        )
    calls, redis_cpu = redis_spent(hot_before, rig.hot.reading())
    joins = entries.count() - before
    return {
        "joins_per_s": joins / JOIN_SECONDS,
        "p50_ms": load["p50_ms"],
        "p99_ms": load["p99_ms"],
        "errors": load["errors"],
        "web_cpu_ms": cpu.spent["web"] * 1000 / joins,
        "postgresql_cpu_ms": cpu.spent["postgresql"] * 1000 / joins,
        "redis_cpu_us": redis_cpu * 1e6 / joins,
        "redis_commands": per(calls, joins),
    }


def _polls_run(rig: Rig, base: str, tickets: Path, web_pgid: int) -> dict[str, Any]:
    hot_before = rig.hot.reading()
    with CpuWindow({"web": web_pgid}) as cpu:
        load = wrk(
            base,
            seconds=POLL_SECONDS,
            connections=POLL_CONNECTIONS,
            script=STATUS_LUA,
            env={"TICKETS": str(tickets)},
            warmup_seconds=0,
        )
    calls, redis_cpu = redis_spent(hot_before, rig.hot.reading())
    polls = load["requests_per_s"] * POLL_SECONDS
    return {
        "polls_per_s": load["requests_per_s"],
        "p50_ms": load["p50_ms"],
        "p99_ms": load["p99_ms"],
        "errors": load["errors"],
        "web_cpu_us": cpu.spent["web"] * 1e6 / polls,
        "redis_cpu_us": redis_cpu * 1e6 / polls,
        "redis_commands": per(calls, polls),
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each numeric figure's spread over the runs; the Redis commands of the last run (they
    are the same in every run)."""
    out: dict[str, Any] = {
        key: spread([float(run[key]) for run in runs])
        for key, value in runs[0].items()
        if isinstance(value, int | float)
    }
    out["redis_commands"] = runs[-1]["redis_commands"]
    return out


def http_costs(rig: Rig, workers: int, event: Event) -> dict[str, Any]:
    """Joins (new fans from addresses of their own) and then status polls, with `workers` web
    processes."""
    cursor = connection.cursor()
    rows_before = pg_table_counters(cursor)
    entries_before = QueueEntry.objects.filter(event_id=event.pk).count()
    stack = rig.stack(f"http-{workers}")
    try:
        base = stack.web(workers=workers)
        web = stack.procs["web"].pid
        url = f"{base}/api/v1/events/{event.slug}/join"
        # Warm-up, not measured: the processes' connection pools fill.
        wrk(url, seconds=2, connections=JOIN_CONNECTIONS, script=JOIN_LUA, warmup_seconds=0)
        joins = [_joins_run(rig, url, event.pk, web) for _ in range(rig.runs)]
        tickets = stack.logdir / "tickets.txt"
        write_tickets(event.pk, tickets)
        polls = [_polls_run(rig, base, tickets, web) for _ in range(rig.runs)]
    finally:
        stack.stop()
    time.sleep(1)
    rows = rows_written(rows_before, pg_table_counters(cursor))
    committed = QueueEntry.objects.filter(event_id=event.pk).count() - entries_before
    # The chain head moves once per committed batch.
    batches = rows["queueing_auditchainhead"]["updated"]
    return {
        "web_processes": workers,
        "joins": _summary(joins),
        "polls": _summary(polls),
        "mean_join_batch": round(committed / batches, 1),
        "rows_per_join": {
            table: {k: round(v / committed, 4) for k, v in counts.items() if v}
            for table, counts in rows.items()
        },
    }


# ---------------------------------------------------------------------------- Redis alone


def _locate_command(sha: str, event_id: int, tier: str, member: str) -> list[str]:
    """A status poll's script call, as redis-benchmark arguments."""
    return [
        *("EVALSHA", sha, "7", keys.epoch(event_id), keys.heartbeats(event_id)),
        *(keys.prequeue(event_id), tier, keys.holders(event_id)),
        *(keys.admitted_counts(event_id), tier),
        *(member, str(int(time.time()) + 3600), "", "", "", ""),
    ]


def _benchmarked(rig: Rig, command: list[str], pipeline: int) -> dict[str, Any]:
    """redis-benchmark's calls/s (50 clients, on this machine's two cores with the server) and
    the server's own CPU per call, over `rig.runs` runs."""
    per_s, cpu_us = [], []
    for _ in range(rig.runs):
        before = rig.hot.reading()
        result = subprocess.run(
            [
                *("redis-benchmark", "-p", str(rig.hot.port), "--dbnum", str(rig.redis_db)),
                *("-n", "100000", "-c", "50", "-P", str(pipeline), "--csv", *command),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        calls, cpu = redis_spent(before, rig.hot.reading())
        per_s.append(float(result.stdout.splitlines()[1].split(",")[1].strip('"')))
        cpu_us.append(cpu * 1e6 / calls["evalsha"])
    return {"calls_per_s": spread(per_s, 0), "server_cpu_us_per_call": spread(cpu_us)}


def locate_ceiling(rig: Rig, event_id: int) -> dict[str, Any]:
    """How many status polls one Redis core answers for one on-sale: locate.lua (look a fan up,
    count the line, refresh the heartbeat) on the on-sale's index, under redis-benchmark."""
    db = redis.Redis(port=rig.hot.port, db=rig.redis_db)
    sha = db.script_load((LUA_DIR / "locate.lua").read_text())
    tier = keys.tier_queue(event_id, event_layout(event_id, fresh=True).tiers[0].id)
    size = db.zcard(tier)
    member = db.zrange(tier, size // 2, size // 2)[0].decode()
    command = _locate_command(sha, event_id, tier, member)
    return {"line": size} | {
        f"pipeline_{pipeline}": _benchmarked(rig, command, pipeline) for pipeline in (1, 16)
    }


# Fills a tier queue and the heartbeats with members lo..hi (Lua: no round trip per member).
_FILL = """
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  redis.call('ZADD', KEYS[1], i, i)
  redis.call('ZADD', KEYS[2], ARGV[3], i)
end
"""
KEEPALIVE_MEMBERS = 3_000  # one web process's sockets on the on-sale, refreshed in one ZADD


def line_size_costs(rig: Rig, sizes: tuple[int, ...]) -> dict[str, Any]:
    """How a status poll's script and the sockets' keep-alive grow with the line: on synthetic
    lines of each size, under the keys of an on-sale that does not exist (a real index of
    millions, made by a rebuild, would take minutes). The keep-alive is the ZADD XX that
    queueing/hot/line_index.py sends with every ticket of a process's sockets."""
    db = redis.Redis(port=rig.hot.port, db=rig.redis_db)
    event_id = 2**40  # no on-sale's id
    tier, beats = keys.tier_queue(event_id, 1), keys.heartbeats(event_id)
    db.set(keys.epoch(event_id), "ready:synthetic:0")
    sha = db.script_load((LUA_DIR / "locate.lua").read_text())
    deadline = time.time() + 3600
    out: dict[str, Any] = {}
    filled = 0
    for size in sorted(sizes):
        for lo in range(filled, size, 100_000):
            db.eval(_FILL, 2, tier, beats, lo, min(size, lo + 100_000) - 1, deadline)
        filled = size
        member = str(size // 2)
        keepalive = []
        for _ in range(rig.runs):
            # A process's tickets are anywhere in the line.
            members = random.sample(range(size), min(size, KEEPALIVE_MEMBERS))
            before = rig.hot.reading()
            db.zadd(beats, dict.fromkeys(members, time.time() + 3600), xx=True)
            spent = command_seconds(before, rig.hot.reading(), "zadd")
            keepalive.append(spent * 1e6 / len(members))
        out[str(size)] = {
            "locate": _benchmarked(rig, _locate_command(sha, event_id, tier, member), 1),
            "keepalive_us_per_member": spread(keepalive),
        }
    db.delete(keys.epoch(event_id), tier, beats)
    return out


def storage_per_row(event_id: int) -> dict[str, Any]:
    """Bytes per row of the two tables that grow with the fans (heap, indexes, TOAST), and
    Redis bytes per waiting fan (bench/lines.py's measure), after the joins made over HTTP."""
    cursor = connection.cursor()
    waiting = QueueEntry.objects.filter(event_id=event_id).count()
    return {
        "queue_entries": QueueEntry.objects.count(),
        "queue_entry_bytes": round(
            table_bytes(cursor, QueueEntry._meta.db_table) / QueueEntry.objects.count()
        ),
        "audit_records": AuditRecord.objects.count(),
        "audit_record_bytes": round(
            table_bytes(cursor, AuditRecord._meta.db_table) / AuditRecord.objects.count()
        ),
        "redis_line": waiting,
        "redis_bytes_per_waiting_fan": round(index_bytes_per_entry(event_id, waiting), 1),
    }


# ---------------------------------------------------------------------------- WebSockets


def _socket_window(
    rig: Rig, event_id: int, port: int, sockets: int, web_pgid: int, into: dict[str, Any]
) -> None:
    """Once every socket is open: the web process's CPU, memory and Redis traffic (run beside
    the clients, in a thread). A socket is open once the server has counted it on its ticket
    in Redis (after its handshake, its first look-up and its snapshot), not at TCP connect."""
    db = redis.Redis(port=rig.hot.port, db=rig.redis_db)
    counted = keys.ticket_sockets(event_id, 0).removesuffix("0") + "*"
    wait_until(lambda: established(port) >= sockets, timeout=120, what=f"{sockets} sockets")
    wait_until(
        lambda: sum(1 for _ in db.scan_iter(match=counted, count=1000)) >= sockets,
        timeout=120,
        interval=0.5,
        what=f"{sockets} sockets counted",
    )
    # From one keep-alive write to the first one at least SOCKET_SECONDS later: whole periods
    # of the keep-alive (one ZADD of a process's tickets every third of the heartbeat,
    # queueing/live/watchers.py; nothing else in the window runs ZADD).
    pace = keepalive_seconds(SOCKETS_HEARTBEAT)
    zadds = next_round(rig.hot, keepalive_rounds(rig.hot), timeout=2 * pace + 5)
    hot_before = rig.hot.reading()
    with CpuWindow({"web": web_pgid}) as cpu:
        for _ in range(max(1, round(SOCKET_SECONDS / pace))):
            zadds = next_round(rig.hot, zadds, timeout=2 * pace + 5)
    hot_after = rig.hot.reading()
    calls, redis_cpu = redis_spent(hot_before, hot_after)
    keepalive = command_seconds(hot_before, hot_after, "zadd")
    (worker,) = children(web_pgid)
    into |= {
        "worker_rss_mib": round(rss_mib(worker), 1),
        "web_cpu_us_per_socket_second": round(cpu.spent["web"] * 1e6 / sockets / cpu.seconds, 2),
        # The hot index's Redis over the window: mostly the tick's own work, not the sockets'.
        "hot_redis_cpu_us_per_socket_second": round(redis_cpu * 1e6 / sockets / cpu.seconds, 3),
        "keepalive_us_per_socket_second": round(keepalive * 1e6 / sockets / cpu.seconds, 4),
        "hot_redis_commands_per_s": per(calls, cpu.seconds),
    }


def socket_costs(rig: Rig, event: Event) -> dict[str, Any]:
    """One web process (with beat and a worker ticking the on-sale) holding N sockets."""
    tickets = rig.logdir / "socket-tickets.txt"
    write_tickets(event.pk, tickets, limit=max(SOCKET_SIZES))
    # The fans without a socket seen a day ahead, as if they polled: none is away meanwhile.
    deadlines_ahead(
        redis.Redis(port=rig.hot.port, db=rig.redis_db), keys.heartbeats(event.pk), by=86_400
    )
    out: dict[str, Any] = {}
    for sockets in SOCKET_SIZES:
        stack = rig.stack(f"sockets-{sockets}")
        try:
            base = stack.web(workers=1)
            stack.worker(concurrency=1)
            stack.beat()
            web = stack.procs["web"].pid
            time.sleep(3)
            (worker,) = children(web)
            idle = rss_mib(worker)
            window: dict[str, Any] = {}
            port = int(base.rsplit(":", 1)[1])
            sampler = threading.Thread(
                target=_socket_window, args=(rig, event.pk, port, sockets, web, window)
            )
            sampler.start()
            # Held through a whole keep-alive period after the first write (up to ~45 s).
            fanout = websocket_fanout(base, event.slug, tickets, sockets, web, hold=60)
            sampler.join()
        finally:
            stack.stop()
        out[str(sockets)] = {
            "worker_rss_mib_idle": round(idle, 1),
            **window,
            "opened": fanout["opened"],
            "tick_to_last_socket_p99_ms": fanout["last_socket_p99_ms"],
        }
    small, large = (out[str(n)] for n in SOCKET_SIZES)
    out["kib_per_socket"] = round(
        (large["worker_rss_mib"] - small["worker_rss_mib"])
        * 1024
        / (SOCKET_SIZES[1] - SOCKET_SIZES[0]),
        1,
    )
    return out
