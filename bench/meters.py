"""Instruments for bench/unit_costs.py: what a Redis server, some PostgreSQL backends and some
processes spent between two readings, and a Redis server of the measurement's own.

The machine's shared Redis and PostgreSQL also serve other people's test suites, so nothing
here reads a server-wide figure of a shared server: Redis figures come from a private
redis-server, PostgreSQL figures from one database's backends and tables.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from bench.box_office import group_cpu_seconds, pids_cpu_seconds
from tests.faults import RedisServer


class PrivateRedis:
    """A redis-server of the measurement's own on a free loopback port, without persistence
    (the fault tests' ``RedisServer``), with what the measurement reads of it."""

    def __init__(self, name: str) -> None:
        self.server = RedisServer(Path(tempfile.mkdtemp(prefix=f"wr-units-{name}-")))
        self.server.start()
        self.port = self.server.port
        self.client = redis.Redis(port=self.port)

    def url(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def reading(self) -> RedisReading:
        stats = self.client.info("commandstats")
        cpu = self.client.info("cpu")
        return RedisReading(
            calls={name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()},
            usec={name.removeprefix("cmdstat_"): int(v["usec"]) for name, v in stats.items()},
            cpu_s=float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
        )

    def stop(self) -> None:
        self.server.kill()
        shutil.rmtree(self.server.workdir, ignore_errors=True)


@dataclass(frozen=True)
class RedisReading:
    calls: dict[str, int]  # command -> calls, commands run inside scripts included
    usec: dict[str, int]  # command -> time running it (a script's includes its commands')
    cpu_s: float  # the server's own user + system CPU (reading, parsing, answering too)


def redis_spent(before: RedisReading, after: RedisReading) -> tuple[dict[str, int], float]:
    """Commands run and CPU spent between two readings; the readings' own INFO calls left out."""
    calls = {
        name: after.calls.get(name, 0) - before.calls.get(name, 0)
        for name in after.calls
        if name != "info"
    }
    info_s = (after.usec.get("info", 0) - before.usec.get("info", 0)) / 1e6
    cpu = (after.cpu_s - before.cpu_s) - info_s
    return {name: n for name, n in sorted(calls.items()) if n}, cpu


def command_seconds(before: RedisReading, after: RedisReading, name: str) -> float:
    """Time spent running one command between two readings (its own work, not the I/O)."""
    return (after.usec.get(name, 0) - before.usec.get(name, 0)) / 1e6


def per(calls: dict[str, int], count: float) -> dict[str, float]:
    return {name: round(n / count, 3) for name, n in calls.items()} if count else {}


# ------------------------------------------------------------------------------ PostgreSQL


def pg_backends(cursor: Any, database: str) -> list[int]:
    """The backends serving ``database``, this process's own left out."""
    cursor.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
        [database],
    )
    return [pid for (pid,) in cursor.fetchall()]


def pg_table_counters(cursor: Any) -> dict[str, tuple[int, int, int]]:
    """Rows inserted, updated and deleted per table of this database since it was made.

    A backend reports its counts at most once a second while busy and at the latest when it
    exits: read after the servers that wrote have stopped. This process's own backend is made
    to report first (it loads and deletes lines between the readings)."""
    cursor.execute("SELECT pg_stat_force_next_flush()")
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables")
    return {name: (ins, upd, dele) for name, ins, upd, dele in cursor.fetchall()}


def pg_sessions(cursor: Any, database: str) -> int:
    """Connections opened to ``database`` since it was made."""
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", [database])
    return int(cursor.fetchone()[0])


def rows_written(
    before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]
) -> dict[str, dict[str, int]]:
    out = {}
    for table, counts in after.items():
        old = before.get(table, (0, 0, 0))
        delta = {
            kind: new - was
            for kind, new, was in zip(("inserted", "updated", "deleted"), counts, old, strict=True)
        }
        if any(delta.values()):
            out[table] = delta
    return out


def table_bytes(cursor: Any, table: str) -> int:
    """Heap, indexes and TOAST of one table."""
    cursor.execute("SELECT pg_total_relation_size(%s::regclass)", [table])
    return int(cursor.fetchone()[0])


# ------------------------------------------------------------------------------ processes


class CpuWindow:
    """CPU spent by process groups (a server with its workers) and by PostgreSQL backends of one
    database, over a window of wall time."""

    def __init__(self, groups: dict[str, int], cursor: Any = None, database: str = "") -> None:
        self.groups = groups
        self.cursor = cursor
        self.database = database

    def __enter__(self) -> CpuWindow:
        self.started = time.monotonic()
        self.group_cpu = {name: group_cpu_seconds(pgid) for name, pgid in self.groups.items()}
        self.backends = pg_backends(self.cursor, self.database) if self.cursor else []
        self.backends_cpu = {pid: pids_cpu_seconds([pid]) for pid in self.backends}
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.started
        self.spent = {
            name: group_cpu_seconds(pgid) - self.group_cpu[name]
            for name, pgid in self.groups.items()
        }
        if self.cursor:
            # Backends opened during the window count from zero: pools grow under load.
            now = pg_backends(self.cursor, self.database)
            self.spent["postgresql"] = sum(
                pids_cpu_seconds([pid]) - self.backends_cpu.get(pid, 0.0) for pid in now
            )


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def established(port: int) -> int:
    """Open TCP connections to a local server port."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return len(out.splitlines())


# ------------------------------------------------------------------------------ summaries


def spread(values: list[float], digits: int = 3) -> dict[str, Any]:
    """Runs of one figure: min, median, max, and each run's value while they are few."""
    out: dict[str, Any] = {
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
    }
    if len(values) <= 10:
        out["runs"] = [round(v, digits) for v in values]
    else:
        out["p90"] = round(sorted(values)[int(0.9 * len(values))], digits)
    return out
