"""Per-operation costs of the room on this machine, the inputs of the capacity plan
(docs/scaling.md, bench/capacity_plan.py).

    python bench/unit_costs.py [--runs 3]        # or `make bench-units`; about four minutes

On a database of its own (`waitingroom_units`) and two redis-servers of its own on free
ports (db 13 on each): the hot index on one, Celery's broker and the channel layer on the
other. The machine's shared Redis also serves other people's test suites, and `INFO
commandstats` and a server's CPU are server-wide: on private servers they count this room's
commands only, and the hot index's apart from the broker's. Each figure is taken `--runs`
times and kept as min / median / max, because the machine is shared:

1. over HTTP, with 1 and then 2 web processes: joins (wrk, bench/join.lua: every join from an
   address and identity of its own, so the production join limits run) and status polls
   (bench/status.lua): per second, CPU per operation of the web processes, their PostgreSQL
   backends and Redis, Redis commands per operation, PostgreSQL rows per join; then bytes
   per row and per waiting fan;
2. Redis alone: the status poll's script (locate.lua) under redis-benchmark, on that line and
   on synthetic lines up to 5,000,000, with the sockets' keep-alive write on each;
3. ticks: one on-sale admitting 100 fans a second (beat + one worker process): Redis commands,
   PostgreSQL rows, worker CPU, per tick;
4. in this process (bench/unit_inprocess.py): join batches by size (statements, the audit chain
   head's hold), join parts by size (PostgreSQL CPU per join), an admission of 500, pass
   hand-overs;
5. WebSockets: one web process's memory and CPU with N sockets (bench/ws_clients.py);
6. the once-a-second dispatch over 300 on-sales with fans.

Step 4 ends with joins of one on-sale with 1, 2, 4 and 8 lanes, a thread per lane
(``--only lanes``: that alone, about a minute, written to ``--out``), and the web CPU of a new
identity drawn in the batch's lane, by lanes (``--only identity-draw``: that alone, seconds),
and a laned line's join views, by lanes and part size (``--only join-views``: that alone, about
a minute).

Writes bench/unit_costs.json, keeping its ``far_back`` (bench/far_back.py's figures, copied
there for the capacity plan). ``--only in-process`` measures step 4 alone (about a minute),
and ``--database NAME`` takes another database than `waitingroom_units` (dropped and made
again), so two people on one machine do not measure in each other's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.environment import ENV, ensure_tools, fresh_database, machine  # noqa: E402
from bench.meters import PrivateRedis  # noqa: E402

DB_NAME = "waitingroom_units"
REDIS_DB = 13
PREFIX = "units"
LOGDIR = ROOT / ".run" / "units"
DISPATCHED_ON_SALES = 300
LINE_SIZES = (3_000, 50_000, 1_000_000, 5_000_000)


def units_env(hot: PrivateRedis, aux: PrivateRedis, database: str = DB_NAME) -> dict[str, str]:
    # The bench's production settings, with the join limits left at their defaults.
    env = {k: v for k, v in ENV.items() if not k.startswith("WR_JOIN_LIMIT")}
    env.update(
        {
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{database}",
            "REDIS_URL": hot.url(REDIS_DB),
            "CHANNELS_REDIS_URL": aux.url(REDIS_DB),
            "CELERY_BROKER_URL": aux.url(REDIS_DB),
            "WR_REDIS_PREFIX": PREFIX,
            "CHANNELS_PREFIX": f"{PREFIX}:asgi",
            "CELERY_TASK_DEFAULT_QUEUE": PREFIX,
            # bench/join.lua gives each join an address of its own in X-Forwarded-For.
            "WR_TRUSTED_PROXY_COUNT": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def measure(
    hot: PrivateRedis,
    aux: PrivateRedis,
    env: dict[str, str],
    runs: int,
    *,
    database: str = DB_NAME,
    only: str = "",
    views: dict[str, Any] | None = None,
) -> dict[str, Any]:
    # Django's models can be imported only now that it is set up.
    from bench import box_office, unit_inprocess, unit_stack
    from queueing.rules.layout import keepalive_seconds
    from tests.events.bulk import bulk_events

    shutil.rmtree(LOGDIR, ignore_errors=True)
    LOGDIR.mkdir(parents=True)
    rig = unit_stack.Rig(hot, aux, env, database, REDIS_DB, LOGDIR, runs)
    on_sale, emptied = unit_stack.on_sale, unit_stack.line_emptied
    if only == "in-process":
        return in_process(hot, runs)
    if only == "lanes":
        return {"lane_joins": lane_joins()}
    if only == "identity-draw":
        return {"identity_draw": identity_draw(runs)}
    if only == "join-views":
        return {"join_views": join_views(hot, runs, **(views or {}))}
    out: dict[str, Any] = {}
    # First, on an empty database: its tables' bytes per row then count no deleted rows.
    joins = on_sale("joins")
    out["http"] = {}
    for workers in (1, 2):
        print(f"1. joins and polls over HTTP, {workers} web process(es)", flush=True)
        out["http"][str(workers)] = unit_stack.http_costs(rig, workers, joins)
    print("2. locate.lua under redis-benchmark", flush=True)
    out["redis_locate"] = unit_stack.locate_ceiling(rig, joins.pk)
    print("2b. locate.lua and the keep-alive on lines of 3,000 to 5,000,000", flush=True)
    out["redis_by_line"] = unit_stack.line_size_costs(rig, LINE_SIZES)
    # The sockets' on-sale has the default heartbeat (60 s): a keep-alive every 20 s.
    out["keepalive_refresh_seconds"] = keepalive_seconds(unit_stack.SOCKETS_HEARTBEAT)
    out["storage"] = unit_stack.storage_per_row(joins.pk)
    # Then no on-sale but the next one has fans: the beat ticks every on-sale with fans.
    emptied(joins.pk)
    print("3. ticks of one on-sale admitting 100 fans a second", flush=True)
    out["ticks"] = unit_stack.tick_costs(rig)

    out |= in_process(hot, runs)

    sizes = ", ".join(f"{n:,}" for n in unit_stack.SOCKET_SIZES)
    print(f"5. WebSockets: {sizes} on one web process", flush=True)
    sockets = on_sale(
        "sockets", fans=max(unit_stack.SOCKET_SIZES), heartbeat_seconds=unit_stack.SOCKETS_HEARTBEAT
    )
    out["sockets"] = unit_stack.socket_costs(rig, sockets)

    print(f"6. the dispatch over {DISPATCHED_ON_SALES} on-sales with fans", flush=True)
    started = dt.datetime.now(dt.UTC)
    made = bulk_events(
        [{"slug": f"d-{i}", "started_at": started} for i in range(DISPATCHED_ON_SALES)]
    )
    box_office.fill([event.pk for event in made], 3)
    out["dispatch"] = unit_inprocess.dispatches(runs, lambda: _claims_cleared(hot))
    return out


def in_process(hot: PrivateRedis, runs: int) -> dict[str, Any]:
    from bench import unit_inprocess, unit_stack

    print("4. join batches, an admission of 500, pass hand-overs (in process)", flush=True)
    out: dict[str, Any] = {}
    batches = unit_stack.on_sale("batches")
    out["join_batches"] = unit_inprocess.join_batches(
        batches.pk, (1, 10, 50, 200, 500), runs, hot.reading
    )
    out["join_parts"] = unit_inprocess.join_parts(batches.pk, (1, 5, 20, 200))
    admit = unit_stack.on_sale("admit", fans=500 * runs + 100)
    out["admission"] = unit_inprocess.admissions(admit.pk, 500, runs)
    out["pass_handover"] = unit_inprocess.pass_handovers(admit.pk, 100)
    unit_stack.line_emptied(batches.pk, admit.pk)
    out["lane_joins"] = lane_joins()
    out["identity_draw"] = identity_draw(runs)
    out["join_views"] = join_views(hot, runs)
    return out


def identity_draw(runs: int) -> dict[str, Any]:
    from bench import unit_inprocess

    print("4c. new identities drawn in the batch's lane, 1 to 64 lanes (in process)", flush=True)
    return unit_inprocess.identity_draws(runs=runs)


def join_views(
    hot: PrivateRedis, runs: int, lanes: tuple[int, ...] = (8, 32), line: int = 30_000
) -> dict[str, Any]:
    from bench import unit_inprocess, unit_stack

    print(f"4d. join views of laned lines, {lanes} lanes of {line:,} (in process)", flush=True)
    return unit_inprocess.join_views(
        lambda slug, n: unit_stack.on_sale(slug, lanes=n),
        hot.reading,
        lane_counts=lanes,
        lane_line=line,
        runs=runs,
    )


def lane_joins() -> dict[str, Any]:
    from bench import unit_inprocess, unit_stack

    print("4b. joins of one on-sale with 1, 2, 4 and 8 lanes (in process)", flush=True)
    return unit_inprocess.lane_joins(lambda slug, lanes: unit_stack.on_sale(slug, lanes=lanes))


def _claims_cleared(hot: PrivateRedis) -> None:
    db = redis.Redis(port=hot.port, db=REDIS_DB)
    claims = list(db.scan_iter(match=f"{PREFIX}:*:tick-claim", count=1000))
    if claims:
        db.delete(*claims)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "unit_costs.json")
    parser.add_argument(
        "--only", choices=["in-process", "lanes", "identity-draw", "join-views"], default=""
    )
    parser.add_argument("--database", default=DB_NAME)
    # With --only join-views: the lines' lanes and the fans in each lane (a sorted set's
    # ZCOUNT grows with the log of its size: a check of the default's).
    parser.add_argument("--view-lanes", default="8,32")
    parser.add_argument("--view-line", type=int, default=30_000)
    options = parser.parse_args()
    ensure_tools()
    # Thousands of sockets need as many descriptors, in the server and the clients.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    started = time.monotonic()
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python bench/unit_costs.py", *sys.argv[1:]]),
        "machine": machine(),
        "load_average_before": [round(v, 2) for v in os.getloadavg()],
        "runs": options.runs,
    }
    hot, aux = PrivateRedis("hot"), PrivateRedis("aux")
    try:
        env = units_env(hot, aux, options.database)
        os.environ.update(env)
        fresh_database(options.database, env)
        import django

        django.setup()
        result.update(
            measure(
                hot,
                aux,
                env,
                options.runs,
                database=options.database,
                only=options.only,
                views={
                    "lanes": tuple(int(n) for n in options.view_lanes.split(",")),
                    "line": options.view_line,
                },
            )
        )
    finally:
        hot.stop()
        aux.stop()
    result["seconds"] = round(time.monotonic() - started)
    if options.out.exists() and not options.only:
        # Far-back pages are measured by bench/far_back.py, not here (the capacity plan reads
        # them from this file): kept from the file this run replaces.
        kept = json.loads(options.out.read_text()).get("far_back")
        if kept is not None:
            result["far_back"] = kept
    options.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {options.out} in {result['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
