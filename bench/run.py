"""`make bench` / `make bench-quick`: the waiting room at on-sale scale, against a reference
measured in the same run.

Starts the real stack in its production configuration (gunicorn with uvicorn workers, Celery
worker and beat, PostgreSQL, Redis) on a database of its own, plus the reference app
(bench/reference_app.py), drives them over loopback with hey and wrk, and prints a table.
Results go to bench/results.json and docs/benchmarks.md.

The rows are measured in bench/table_rows.py; this runs them in order and renders the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import resource
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Run as a script, Python puts bench/ on the path, not the project.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# rehearsal/run.py imports ENV and fresh_database from here.
from bench.environment import ENV, ROOT, ensure_tools, fresh_database, machine

if TYPE_CHECKING:
    from bench.table_rows import OnSales, Sizes


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="under two minutes, smaller")
    parser.add_argument(
        "--websockets-only",
        type=int,
        metavar="SOCKETS",
        help="only the WebSocket fan-out, with this many sockets (for profiling it)",
    )
    parser.add_argument(
        "--box-office-only", action="store_true", help="only the box office rows (5a-5c)"
    )
    parser.add_argument(
        "--status-only",
        type=int,
        metavar="ROUNDS",
        help="only the status rows (single Redis, reference, cluster), this many rounds on a "
        "bulk-loaded line of 60,000 (to compare a change to the lean status path)",
    )
    parser.add_argument(
        "--gate-only",
        type=int,
        metavar="ROUNDS",
        help="only the gate row and the reference, this many rounds (to compare a change to "
        "the gate's check)",
    )
    parser.add_argument(
        "--far-back-only",
        action="store_true",
        help="only the far-back row (pages spread over a long line, before and after)",
    )
    parser.add_argument(
        "--outage-only",
        action="store_true",
        help="only the Redis outage row (a line of a million, Redis up, stopped, back)",
    )
    parser.add_argument(
        "--line-end-only",
        action="store_true",
        help="only the line-end row (a line of a million closed and revoked)",
    )
    parser.add_argument("--web-workers", type=int, default=2)
    # Offered a little above the target, by many paced clients (each sends every ~190 ms):
    # a hey worker whose answer is late skips a beat, so offering exactly 1,000/s from few
    # workers measures hey's pacing, not the server.
    parser.add_argument("--join-rate", type=float, default=1050.0)
    return parser.parse_args()


def prepare() -> None:
    """The load generators installed, an empty database, and Django set up on it."""
    ensure_tools()
    # Ten thousand sockets need as many descriptors, in the server and the clients.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.environ.update(ENV)
    fresh_database()
    import django

    django.setup()


def fresh_logdir() -> Path:
    logdir = ROOT / ".run" / "bench"
    shutil.rmtree(logdir, ignore_errors=True)
    logdir.mkdir(parents=True)
    return logdir


def publish(results: dict[str, Any], *, quick: bool) -> None:
    """``results`` in bench/results.json, and their table printed and (for `make bench`) in
    docs/benchmarks.md."""
    (ROOT / "bench" / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    report = render(results)
    print(report)
    if not quick:
        # The table, then what was learnt from it (hand-written, kept across runs).
        notes = (ROOT / "docs" / "benchmarks-notes.md").read_text()
        (ROOT / "docs" / "benchmarks.md").write_text(report + "\n" + notes)


def one_row_alone(
    options: argparse.Namespace, sizes: Sizes, on_sales: OnSales, logdir: Path
) -> bool:
    """The row an ``--*-only`` option asks for, alone, its figures printed; False if none
    does (the whole table is wanted)."""
    from bench import table_rows as rows

    if options.box_office_only:
        print(json.dumps(rows.box_office_rows(logdir, sizes), indent=2))
    elif options.line_end_only:
        print(json.dumps(rows.line_end_row(logdir, sizes), indent=2))
    elif options.far_back_only:
        print(json.dumps(rows.far_back(logdir, sizes), indent=2))
    elif options.outage_only:
        print(json.dumps(rows.redis_outage(logdir, sizes, options.web_workers), indent=2))
    elif options.websockets_only or options.gate_only or options.status_only:
        with rows.running_stack(logdir, options.web_workers) as running:
            if options.websockets_only:
                tickets = logdir / "tickets.txt"
                sockets = options.websockets_only
                report = rows.websockets_alone(running, on_sales.large, tickets, sockets)
                print(json.dumps(report, indent=2))
            elif options.gate_only:
                rows.gate_rounds(running, on_sales.gate, logdir, sizes, options.gate_only)
            else:
                rows.status_rounds(
                    running,
                    on_sales.joins,
                    logdir,
                    sizes,
                    rounds=options.status_only,
                    web_workers=options.web_workers,
                )
    else:
        return False
    return True


def main() -> None:
    options = parse_options()
    prepare()
    # The rows import the project's models, which only Django set up can load.
    from bench import table_rows as rows

    sizes = rows.Sizes.of(quick=options.quick)
    on_sales = rows.on_sales()
    logdir = fresh_logdir()
    if one_row_alone(options, sizes, on_sales, logdir):
        return
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "make bench-quick" if options.quick else "make bench",
        "machine": machine(),
        "web_workers": options.web_workers,
    }
    tickets = logdir / "tickets.txt"
    with rows.running_stack(logdir, options.web_workers) as running:
        results["joins"] = rows.joins(running, on_sales.joins, sizes, options.join_rate)
        results["status"], results["reference"] = rows.status(
            running, on_sales.joins, tickets, sizes
        )
        reference = results["reference"]
        results["cluster_status"] = rows.cluster_status(
            logdir,
            on_sales.joins,
            tickets,
            sizes,
            web_workers=options.web_workers,
            reference=reference,
        )
        results["gate"] = rows.gate(running, on_sales.gate, logdir, sizes, reference)
        results["big_line"] = rows.big_line(running, on_sales, tickets, sizes)
        results["websockets"] = rows.websockets(running, on_sales.large, tickets, sizes.sockets)
    # On databases of their own: the rows above leave big lines that would tick too.
    rows.database_emptied()
    results["outage"] = rows.redis_outage(logdir, sizes, options.web_workers)
    rows.database_emptied()
    results["line_end"] = rows.line_end_row(logdir, sizes)
    rows.database_emptied()
    results["box_office"] = rows.box_office_rows(logdir, sizes)
    results["far_back"] = rows.far_back(logdir, sizes)
    publish(results, quick=options.quick)


def render(r: dict[str, Any]) -> str:
    j, s, ref, b = r["joins"], r["status"], r["reference"], r["big_line"]
    out = io.StringIO()
    m = r["machine"]
    out.write(
        "# Benchmarks\n\n"
        f"`{r['command']}` on {r['date']}: {m['cpus']} CPUs, {m['memory_gib']} GiB, Python "
        f"{m['python']}, {m['platform']}; load generators (hey, wrk) on the same machine; "
        f"{r['web_workers']} gunicorn/uvicorn workers, and the reference with as many.\n\n"
        "| scenario | measured | target | met |\n|---|---|---|---|\n"
    )

    def row(name: str, measured: str, target: str, met: bool) -> None:
        out.write(f"| {name} | {measured} | {target} | {'yes' if met else 'no'} |\n")

    row(
        "joins (durable)",
        f"{j['requests_per_s']:.0f}/s, p50 {j['p50_ms']:.0f} ms, p99 "
        f"{j['p99_ms']:.0f} ms, {j['errors']} errors",
        "≥ 1,000/s, p99 ≤ 200 ms, 0 errors",
        j["requests_per_s"] >= 1000 and j["p99_ms"] <= 200 and j["errors"] == 0,
    )
    row(
        "status polls",
        f"{s['requests_per_s']:.0f}/s ({s['ratio_to_reference']:.2f} × the "
        f"reference's {ref['requests_per_s']:.0f}/s), p99 {s['p99_ms']:.0f} ms",
        "≥ 3,000/s, ≥ 0.5 × reference, p99 ≤ 100 ms",
        s["requests_per_s"] >= 3000 and s["ratio_to_reference"] >= 0.5 and s["p99_ms"] <= 100,
    )
    c = r["cluster_status"]
    row(
        "status polls, hot index on a Redis Cluster (3 masters, 3 replicas)",
        f"{c['requests_per_s']:.0f}/s ({c['ratio_to_reference']:.2f} × the reference), "
        f"p99 {c['p99_ms']:.0f} ms, {c['errors']} errors",
        "≥ 3,000/s, ≥ 0.5 × reference, p99 ≤ 100 ms",
        c["requests_per_s"] >= 3000 and c["ratio_to_reference"] >= 0.5 and c["p99_ms"] <= 100,
    )
    if "gate" in r:
        g = r["gate"]
        row(
            "gate checks (`GET /gate/{slug}/check`, nginx auth_request): 90% with a pass "
            "cookie, 10% without",
            f"{g['requests_per_s']:.0f}/s ({g['ratio_to_reference']:.2f} × the reference), "
            f"p99 {g['p99_ms']:.0f} ms; {g['admitted_share']:.0%} 204, "
            f"{g['refused_share']:.0%} 401, {g['errors']} other",
            "≥ 0.5 × reference, p99 ≤ 50 ms, 0 other",
            g["ratio_to_reference"] >= 0.5 and g["p99_ms"] <= 50 and g["errors"] == 0,
        )
    at = b["status_at_size"]
    row(
        f"big line ({b['fans']:,} waiting)",
        f"{b['redis_bytes_per_entry']:.0f} B/entry in Redis; status {at['requests_per_s']:.0f}/s "
        f"p99 {at['p99_ms']:.0f} ms; admission tick {b['admission_tick_ms_big']:.0f} ms vs "
        f"{b['admission_tick_ms_1k']:.0f} ms at 1k ({b['admission_tick_ratio']}×)",
        "≤ 300 B/entry, tick within 2× of 1k",
        b["redis_bytes_per_entry"] <= 300 and b["admission_tick_ratio"] <= 2,
    )
    w = r["websockets"]
    row(
        f"WebSockets ({w['opened']:,} of {w['sockets']:,} open, {w['failed']} failed)",
        f"server {w['server_rss_mib_peak']} MiB; tick to last socket p50 "
        f"{w['last_socket_p50_ms']} ms, p99 {w['last_socket_p99_ms']} ms, max "
        f"{w['last_socket_max_ms']} ms (any socket p99 {w['delay_p99_ms']} ms) over "
        f"{w['ticks_seen_by_all']} ticks",
        "10,000 concurrent, ≤ 1.5 GiB, tick reaches all with p99 ≤ 1 s",
        w["opened"] >= 10_000
        and w["server_rss_mib_peak"] <= 1536
        and (w["last_socket_p99_ms"] or 10**9) <= 1000,
    )
    if "outage" in r:
        outage_render(r["outage"], row)
    if "line_end" in r:
        line_end_render(r["line_end"], row)
    box_office_render(r["box_office"], row)
    if "far_back" in r:
        far_back_render(r["far_back"], row)
    out.write(
        "\n"
        f"Loading {b['fans']:,} fans took {b['copy_s']} s (COPY) and rebuilding their index "
        f"{b['index_rebuild_s']} s. Raw figures: `bench/results.json`.\n"
    )
    return out.getvalue()


def outage_render(o: dict[str, Any], row: Any) -> None:
    up, down = o["normal"], o["redis_stopped"]
    row(
        f"Redis outage ({o['fans']:,} waiting; hot-index Redis stopped, broker and channel "
        "layer elsewhere)",
        f"status {down['requests_per_s']:.0f}/s ({down['ratio_to_normal']:.2f} × the "
        f"{up['requests_per_s']:.0f}/s with Redis), p99 {down['p99_ms']:.0f} ms (with Redis "
        f"{up['p99_ms']:.0f} ms), {down['errors']} errors; PostgreSQL "
        f"{down['postgresql_cpu_pct']}% of a core (with Redis {up['postgresql_cpu_pct']}%); "
        f"polls told {down['answer']['poll_after_s']:g} s (with Redis "
        f"{up['answer']['poll_after_s']:g} s); index whole again {o['whole_again_s']} s after "
        "Redis returned",
        "≥ 0.5 × with Redis, p99 ≤ 200 ms, whole again ≤ 10 s",
        down["ratio_to_normal"] >= 0.5 and down["p99_ms"] <= 200 and o["whole_again_s"] <= 10,
    )


def line_end_render(e: dict[str, Any], row: Any) -> None:
    row(
        f"line end: {e['fans']:,} waiting, the on-sale closed, revoked by the worker and beat",
        f"{e['revoke_s']} s from the close until nobody was left in line or in the hot index "
        f"({e['fans_per_s']:,}/s); {e['revoked_records']:,} `revoked` records for "
        f"{e['revoked_tickets']:,} fans; the trail of {e['trail_records']:,} records "
        f"{'verifies' if e['trail_ok'] else 'DOES NOT verify'} ({e['verify_s']} s)",
        "≤ 60 s at 1,000,000; one record per fan; the trail verifies",
        e["revoke_s"] <= 60 * e["fans"] / 1_000_000
        and e["revoked_records"] == e["revoked_tickets"] == e["fans"]
        and e["trail_ok"],
    )


def far_back_render(f: dict[str, Any], row: Any) -> None:
    before, after = f["before"], f["after"]
    # A quick run's short line may put no socket far back: that band is then not judged.
    front = after["ticks"]["front"]
    far = after["ticks"].get("far") or {"ticks_per_socket_second": "–", "longest_gap_s": 0}
    row(
        f"far-back pages: {after['sockets_open']:,} sockets spread over a line of "
        f"{f['fans']:,} (1 web process), against the room before (`{f['reference_commit'][:7]}`)",
        f"web CPU per socket-second {before['web_cpu_us_per_socket_second']} → "
        f"{after['web_cpu_us_per_socket_second']} µs ({f['web_ratio']}×); the slot's keep-alive "
        f"{before['keepalive_us_per_socket_second']} → {after['keepalive_us_per_socket_second']}"
        f" µs ({f['slot_ratio']}×); front band {front['ticks_per_socket_second']} ticks/s, p99 "
        f"{front['delay_p99_ms']} ms after broadcast; far back {far['ticks_per_socket_second']} "
        f"ticks/s, longest gap {far['longest_gap_s']} s",
        "≥ 4× less each; the front every tick within 1 s; far-back gaps ≤ 10 s",
        f["web_ratio"] >= 4
        and f["slot_ratio"] >= 4
        and front["ticks_per_socket_second"] >= 0.95
        and (front["delay_p99_ms"] or 10**6) <= 1000
        and far["longest_gap_s"] <= 10,
    )


def box_office_render(bo: dict[str, Any], row: Any) -> None:
    idle, busy, scaling = bo["idle"], bo["busy"], bo["scaling"]
    row(
        f"box office: {bo['configured']:,} on-sales, {busy['on_sales']} busy at "
        f"{busy['rate_per_minute']}/min with {busy['fans_each']:,} waiting each",
        f"admitted {min(busy['admitted_each'])}–{max(busy['admitted_each'])} of "
        f"{busy['expected_each']:.0f} in {busy['seconds']} s (worst {busy['worst_pace_error_pct']}%"
        f" off); live tick interval p50 {busy['tick_interval_p50_s']} s, p99 "
        f"{busy['tick_interval_p99_s']} s, max {busy['tick_interval_max_s']} s",
        "each within 5% of its pace; tick interval p99 ≤ 1.5 s",
        busy["worst_pace_error_pct"] <= 5 and (busy["tick_interval_p99_s"] or 99) <= 1.5,
    )
    row(
        f"box office: the {bo['configured'] - busy['on_sales']:,} idle or scheduled on-sales",
        f"workers {idle['worker_cpu_pct_of_core']}% of one core, beat "
        f"{idle['beat_cpu_pct_of_core']}%, over {idle['seconds']} s",
        "workers < 5% of one core",
        idle["worker_cpu_pct_of_core"] < 5,
    )
    row(
        f"box office: {scaling['on_sales']} on-sales with fans, 1 vs 2 worker processes",
        f"{scaling['ticks_per_s_1_worker']} vs {scaling['ticks_per_s_2_worker']} on-sale ticks/s "
        f"({scaling['ratio']}×)",
        "more ticks with more workers (≥ 1.5×)",
        (scaling["ratio"] or 0) >= 1.5,
    )


if __name__ == "__main__":
    main()
