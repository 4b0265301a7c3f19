"""The load generators (hey, wrk with bench/*.lua, the WebSocket clients of
bench/ws_clients.py) and what they report: requests per second, latency, errors.

Django need not be set up to import it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.environment import BIN, ROOT, sh


def hey(url: str, *, seconds: int, concurrency: int, rate: float, post: bool) -> dict[str, Any]:
    argv = [
        "hey",
        "-z",
        f"{seconds}s",
        "-c",
        str(concurrency),
        "-q",
        f"{max(1.0, rate / concurrency):.2f}",
    ]
    if post:
        argv += ["-m", "POST", "-T", "application/json", "-d", "{}"]
    out = sh(*argv, url).stdout
    codes = {int(c): int(n) for c, n in re.findall(r"\[(\d{3})\]\s+(\d+) responses", out)}
    ok = sum(n for c, n in codes.items() if 200 <= c < 300)
    latency = {p: float(v) * 1000 for p, v in re.findall(r"(\d+)%+ in ([\d.]+) secs", out)}
    return {
        "requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50_ms": latency.get("50"),
        "p99_ms": latency.get("99"),
        "ok": ok,
        "errors": sum(codes.values()) - ok + len(re.findall(r"Error distribution", out)),
        "status_codes": codes,
    }


def _ms(value: str) -> float:
    number, unit = re.match(r"([\d.]+)(us|ms|s)", value).groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def wrk(
    url: str,
    *,
    seconds: int,
    connections: int,
    script: str | None = None,
    env: dict[str, str] | None = None,
    warmup_seconds: int = 3,
) -> dict[str, Any]:
    """``seconds`` of wrk against ``url``, after an unmeasured warm-up of the same load: every
    server is measured warm (its processes' caches filled, its Redis connections open), as the
    status row's server is after the join burst."""
    argv = ["wrk", "-t", "2", "-c", str(connections), "--latency"]
    if script:
        argv += ["-s", script]
    wrk_env = {**os.environ, **(env or {})}
    if warmup_seconds:
        sh(*argv, "-d", f"{warmup_seconds}s", url, env=wrk_env)
    out = sh(*argv, "-d", f"{seconds}s", url, env=wrk_env).stdout
    latency = dict(re.findall(r"^\s+(\d+)%\s+(\S+)$", out, re.M))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    result = {
        "requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50_ms": _ms(latency["50"]),
        "p99_ms": _ms(latency["99"]),
        "errors": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": socket_errors.group(1) if socket_errors else None,
    }
    if statuses := re.search(r"^gate statuses:(.*)$", out, re.M):  # bench/gate.lua's count
        result["statuses"] = {
            int(code): int(count) for code, count in re.findall(r"(\d+)=(\d+)", statuses[1])
        }
    return result


def to_reference(row: dict[str, Any], reference: dict[str, Any]) -> float:
    """``row``'s requests per second as a share of the reference app's."""
    return round(row["requests_per_s"] / reference["requests_per_s"], 3)


def status_polls(base: str, tickets: Path, *, seconds: int) -> dict[str, Any]:
    """Status polls of the tickets in ``tickets`` against ``base``: 64 connections, as the
    status rows measure them (bench/status.lua)."""
    return wrk(
        base,
        seconds=seconds,
        connections=64,
        script=str(ROOT / "bench" / "status.lua"),
        env={"TICKETS": str(tickets)},
    )


def gate_checks(base: str, passes: Path, *, slug: str, seconds: int) -> dict[str, Any]:
    """The gate's check of the on-sale ``slug`` as nginx asks it on every request to a
    protected shop: 90% with a valid pass cookie (204), 10% without (401), against the same
    web server."""
    result = wrk(
        base,
        seconds=seconds,
        connections=64,
        script=str(ROOT / "bench" / "gate.lua"),
        env={"PASSES": str(passes), "SLUG": slug},
    )
    statuses = result.get("statuses", {})
    total = sum(statuses.values()) or 1
    result["admitted_share"] = round(statuses.get(204, 0) / total, 3)
    result["refused_share"] = round(statuses.get(401, 0) / total, 3)
    # 401 is the answer asked for, not an error; anything but 204 or 401 is.
    result["errors"] = total - statuses.get(204, 0) - statuses.get(401, 0) if statuses else None
    return result


def server_rss_mib(pgid: int) -> float:
    """Resident memory of the web server: gunicorn's master and all its workers."""
    out = subprocess.run(["ps", "-o", "rss=", "-g", str(pgid)], capture_output=True, text=True)
    return sum(int(v) for v in out.stdout.split()) / 1024


def percentile(values: list[float], point: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(point / 100 * len(ordered)))]


def ws_clients_start(
    base: str, slug: str, tickets: Path, sockets: int, *, clients: int, hold: int
) -> list[subprocess.Popen[bytes]]:
    """`sockets` waiting-page sockets (bench/ws_clients.py) over `clients` processes, each
    holding its sockets `hold` seconds once all of them are open; client i reports to
    ws-report-i.json beside `tickets`."""
    per_client = sockets // clients
    ws_url = base.replace("http://", "ws://") + f"/ws/events/{slug}/"
    return [
        subprocess.Popen(
            [
                str(BIN / "python"),
                str(ROOT / "bench" / "ws_clients.py"),
                ws_url,
                base,
                str(tickets),
                str(i * per_client),
                str(per_client),
                str(hold),
                str(tickets.parent / f"ws-report-{i}.json"),
            ]
        )
        for i in range(clients)
    ]


def websocket_fanout(
    base: str, slug: str, tickets: Path, sockets: int, web_pgid: int, *, hold: int = 20
) -> dict[str, Any]:
    """`sockets` waiting-page sockets over four client processes, held `hold` seconds once all
    are open; ticks come from beat."""
    clients = 4
    procs = ws_clients_start(base, slug, tickets, sockets, clients=clients, hold=hold)
    peak = 0.0
    while any(p.poll() is None for p in procs):
        peak = max(peak, server_rss_mib(web_pgid))
        time.sleep(1)
    reports = [
        json.loads((tickets.parent / f"ws-report-{i}.json").read_text()) for i in range(clients)
    ]
    # Ticks broadcast once every client had all its sockets open.
    start = max(report["measured_from"] for report in reports)
    by_tick: dict[str, list[float]] = {}
    for report in reports:
        for at, delays in report["delays"].items():
            if float(at) >= start:
                by_tick.setdefault(at, []).extend(delays)
    opened = sum(r["opened"] for r in reports)
    # Ticks that every open socket saw (a socket that missed one shows up as fewer ticks).
    full = [d for d in by_tick.values() if len(d) >= opened]
    every = [x for d in full for x in d]
    last = [max(d) for d in full]
    return {
        "sockets": sockets,
        "opened": opened,
        "failed": sum(r["failed"] for r in reports),
        "server_rss_mib_peak": round(peak),
        "ticks_measured": len(by_tick),
        "ticks_seen_by_all": len(full),
        "delay_p50_ms": round(percentile(every, 50) * 1000) if every else None,
        "delay_p99_ms": round(percentile(every, 99) * 1000) if every else None,
        "last_socket_p50_ms": round(percentile(last, 50) * 1000) if last else None,
        "last_socket_p99_ms": round(percentile(last, 99) * 1000) if last else None,
        "last_socket_max_ms": round(max(last) * 1000) if last else None,
    }
