"""Render the Grafana dashboards of deploy/grafana/ from a real Prometheus, for the docs.

Debian has no Grafana package and none can be downloaded where the docs are made, so the
screenshots in docs/operations.md ("On-sale night: what to watch") are made this way: a room
(two web processes' worth of gunicorn workers, a Celery worker, the scheduler) runs a small
synthetic on-sale; Debian's `prometheus` scrapes it every 2 s with the room's alert rules;
then each panel's own PromQL is asked of Prometheus's HTTP API (query_range) and drawn as
inline SVG in an HTML page laid out on the dashboard's grid, which Chromium screenshots
(Playwright, as tests/browser.py launches it).

    .venv/bin/python scripts/render_dashboards.py [--minutes 3]

writes docs/observability-room-overview.png and docs/observability-on-sale.png. It uses a
database and Redis database of its own (waitingroom_render, Redis 13), emptied first.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.environment import ENV, fresh_database  # noqa: E402
from tests.browser import chromium  # noqa: E402
from tests.processes import Stack, free_port, wait_until  # noqa: E402

DB_NAME = "waitingroom_render"
SLUG = "stadium-night"
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
RENDER_ENV = {
    **ENV,
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": "redis://127.0.0.1:6379/13",
    "WR_REDIS_PREFIX": "render",
    "CHANNELS_PREFIX": "render:asgi",
    "CELERY_TASK_DEFAULT_QUEUE": "render",
    "DATABASE_POOL_MAX": "8",
    # Fans from many addresses (X-Forwarded-For, one trusted proxy), each limited.
    "WR_TRUSTED_PROXY_COUNT": "1",
    "WR_JOIN_LIMIT_PER_IP": "5",
    "WR_JOIN_LIMIT_PER_IDENTITY": "0",
    "WR_SOCKETS_PER_ADDRESS": "0",
}


def _event_create() -> None:
    code = (
        "from django.utils import timezone\n"
        "from staff.services import event_create\n"
        f"event_create(actor='render', now=timezone.now(), slug={SLUG!r}, name='Stadium night',"
        " target_url='https://shop.example/checkout', capacity=0, rate_per_minute=240,"
        " heartbeat_seconds=45, away_seconds=15)\n"
    )
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env={**os.environ, **RENDER_ENV},
        check=True,
    )


def _post_join(base_url: str, address: str) -> dict[str, Any] | None:
    request = urllib.request.Request(
        f"{base_url}/api/v1/events/{SLUG}/join",
        data=b"{}",
        headers={"Content-Type": "application/json", "X-Forwarded-For": address},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, TimeoutError, ValueError):
        return None


def _poll(base_url: str, ticket: str) -> None:
    try:
        urllib.request.urlopen(f"{base_url}/api/v1/tickets/{ticket}", timeout=15).read()
    except (urllib.error.URLError, TimeoutError):
        pass


def _gate_check(base_url: str) -> None:
    try:
        urllib.request.urlopen(f"{base_url}/gate/{SLUG}/check", timeout=15).read()
    except (urllib.error.URLError, TimeoutError):
        pass


def _sockets(base_url: str, tickets: list[str], seconds: float) -> None:
    """Waiting pages: a socket held open for each of ``tickets`` for ``seconds``."""
    url = base_url.replace("http://", "ws://") + f"/ws/events/{SLUG}/?ticket="

    async def hold(ticket: str) -> None:
        try:
            async with websockets.connect(url + ticket, origin=base_url) as socket:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    try:
                        await asyncio.wait_for(socket.recv(), timeout=1)
                    except TimeoutError:
                        pass
        except (OSError, websockets.WebSocketException):
            pass

    async def hold_all() -> None:
        await asyncio.gather(*(hold(ticket) for ticket in tickets))

    asyncio.run(hold_all())


def _fans(base_url: str, seconds: float, stop: threading.Event) -> None:
    """Joins at about 20 a second for the first 60 % of the time, then 2; most fans poll
    every few seconds, a few never (they expire); a burst from one address now and then
    (429s); gate checks from the shop; after a while, some pages hold a socket."""
    tickets: list[str] = []
    pages = threading.Thread()
    pages_started = False
    started = time.monotonic()
    while not stop.is_set() and (elapsed := time.monotonic() - started) < seconds:
        share = elapsed / seconds
        joins_now = 10 if share < 0.6 else 1
        for _ in range(joins_now):
            body = _post_join(base_url, f"10.{random.randrange(255)}.{random.randrange(255)}.7")
            if body and "ticket" in body and random.random() < 0.9:
                tickets.append(body["ticket"])
        if random.random() < 0.05:
            for _ in range(8):
                _post_join(base_url, "192.0.2.66")
        for ticket in random.sample(tickets, min(len(tickets), 15)):
            _poll(base_url, ticket)
        for _ in range(3):
            _gate_check(base_url)
        if len(tickets) >= 40 and not pages.is_alive() and not pages_started:
            pages_started = True
            pages = threading.Thread(
                target=_sockets,
                args=(base_url, tickets[-40:], (seconds - elapsed) * 0.8),
                daemon=True,
            )
            pages.start()
        time.sleep(0.5)


def _prometheus(config_dir: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    shutil.copy(ROOT / "deploy" / "prometheus" / "alerts.yml", config_dir / "alerts.yml")
    (config_dir / "prometheus.yml").write_text(
        "global: {scrape_interval: 2s, evaluation_interval: 2s}\n"
        "rule_files: [alerts.yml]\n"
        "scrape_configs:\n"
        "  - job_name: waitingroom\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n"
    )
    process = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config_dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={config_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(config_dir / "prometheus.log", "wb"),
        start_new_session=True,
    )
    return process, f"http://127.0.0.1:{port}"


def _query_range(prometheus: str, expr: str, start: float, end: float) -> list[dict]:
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 2})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{query}", timeout=30) as r:
        return json.loads(r.read())["data"]["result"]


def _legend(template: str, labels: dict[str, str]) -> str:
    for name, value in labels.items():
        template = template.replace("{{" + name + "}}", value)
    return template


def _chart(series: list[tuple[str, list[tuple[float, float]]]], width: int, height: int) -> str:
    """One panel's series as an SVG line chart (time on x, values on y from 0)."""
    pad_left, pad_bottom = 48, 20
    points = [p for _, values in series for p in values]
    if not points:
        return (
            f'<svg width="{width}" height="{height}">'
            '<text x="10" y="30" fill="#aaa">no data</text></svg>'
        )
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    highest = max(v for _, v in points)
    top = highest * 1.1 if highest > 0 else 1.0
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - 8

    def xy(t: float, v: float) -> str:
        x = pad_left + (t - t0) / max(t1 - t0, 1) * plot_w
        return f"{x:.1f},{8 + plot_h - v / top * plot_h:.1f}"

    parts = [f'<svg width="{width}" height="{height}" font-size="10" font-family="sans-serif">']
    for i in range(5):
        value = top * i / 4
        y = 8 + plot_h - plot_h * i / 4
        parts.append(
            f'<line x1="{pad_left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}" stroke="#333"/>'
            f'<text x="{pad_left - 4}" y="{y + 3:.1f}" text-anchor="end" fill="#aaa">'
            f"{value:.3g}</text>"
        )
    for i in range(5):
        t = t0 + (t1 - t0) * i / 4
        parts.append(
            f'<text x="{pad_left + plot_w * i / 4:.1f}" y="{height - 4}" fill="#aaa" '
            f'text-anchor="middle">{time.strftime("%H:%M:%S", time.gmtime(t))}</text>'
        )
    for index, (_, values) in enumerate(series):
        path = " ".join(xy(t, v) for t, v in values)
        color = COLORS[index % len(COLORS)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{path}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _page(dashboard: dict, prometheus: str, start: float, end: float) -> str:
    """The dashboard's panels on its 24-column grid, each drawn from its own queries."""
    column, row = 54, 34
    cells = []
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        width, height = grid["w"] * column, grid["h"] * row
        series = []
        for target in panel["targets"]:
            expr = target["expr"].replace("$event", SLUG)
            for result in _query_range(prometheus, expr, start, end):
                values = [
                    (float(t), float(v)) for t, v in result["values"] if v not in ("NaN", "+Inf")
                ]
                series.append((_legend(target["legendFormat"], result["metric"]), values))
        if panel["type"] == "stat":
            last = series[0][1][-1][1] if series and series[0][1] else None
            body = (
                f'<div class="stat">{"–" if last is None else f"{last:.4g}"}</div>'
                f"{_chart(series, width - 16, height - 90)}"
            )
        else:
            legend = "".join(
                f'<span style="color:{COLORS[i % len(COLORS)]}">■ {html.escape(name)}</span> '
                for i, (name, _) in enumerate(series)
            )
            body = f"{_chart(series, width - 16, height - 56)}<div class='legend'>{legend}</div>"
        cells.append(
            f'<div class="panel" style="left:{grid["x"] * column}px;top:{grid["y"] * row}px;'
            f'width:{width - 8}px;height:{height - 8}px">'
            f"<h3>{html.escape(panel['title'])}</h3>{body}</div>"
        )
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"]) * row
    title = html.escape(dashboard["title"])
    note = "Rendered from Prometheus (not Grafana): each panel's own query, query_range."
    if any(v["name"] == "event" for v in dashboard["templating"]["list"]):
        note += f" event = {SLUG}."
    return (
        "<!doctype html><meta charset='utf-8'><style>"
        "body{background:#111217;color:#ccccdc;font-family:sans-serif;margin:12px}"
        ".panel{position:absolute;background:#181b1f;border:1px solid #2c3235;padding:4px}"
        "h1{font-size:18px;margin:0 0 4px}h3{font-size:12px;margin:2px 4px}"
        ".stat{font-size:34px;color:#73bf69;margin:4px 8px}.legend{font-size:10px;margin:0 6px}"
        f"</style><h1>{title}</h1><p style='font-size:11px;margin:0 0 8px'>{note}</p>"
        f"<div style='position:relative;height:{bottom}px'>{''.join(cells)}</div>"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    args = parser.parse_args()
    if shutil.which("prometheus") is None:
        sys.exit("prometheus is not installed: scripts/ensure_prometheus.sh")
    fresh_database(DB_NAME, RENDER_ENV)
    _event_create()
    with tempfile.TemporaryDirectory(prefix="wr-render-") as tmp:
        workdir = Path(tmp)
        (workdir / "multiproc").mkdir()
        env = {
            **os.environ,
            **RENDER_ENV,
            "PYTHONUNBUFFERED": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(workdir / "multiproc"),
        }
        stack = Stack(env, workdir)
        prometheus_process = None
        try:
            web = stack.web(workers=2)
            stack.worker(concurrency=2)
            stack.beat()
            prometheus_process, prometheus = _prometheus(workdir, web.removeprefix("http://"))
            wait_until(lambda: _up(prometheus), timeout=60, what="Prometheus to scrape the room")
            start = time.time()
            stop = threading.Event()
            seconds = args.minutes * 60
            fans = [threading.Thread(target=_fans, args=(web, seconds, stop)) for _ in range(2)]
            for thread in fans:
                thread.start()
            for thread in fans:
                thread.join()
            time.sleep(10)  # the last scrapes
            end = time.time()
            for name in ("room-overview", "on-sale"):
                dashboard = json.loads((ROOT / "deploy" / "grafana" / f"{name}.json").read_text())
                page_file = workdir / f"{name}.html"
                page_file.write_text(_page(dashboard, prometheus, start, end))
                with chromium() as browser:
                    page = browser.new_page(viewport={"width": 24 * 54 + 24, "height": 600})
                    page.goto(page_file.as_uri())
                    out = ROOT / "docs" / f"observability-{name}.png"
                    page.screenshot(path=str(out), full_page=True)
                    print(f"wrote {out.relative_to(ROOT)}")
        finally:
            if prometheus_process is not None:
                prometheus_process.terminate()
                prometheus_process.wait(timeout=10)
            stack.stop()


def _up(prometheus: str) -> bool:
    try:
        with urllib.request.urlopen(f"{prometheus}/api/v1/query?query=up", timeout=2) as r:
            results = json.loads(r.read())["data"]["result"]
    except (urllib.error.URLError, TimeoutError, ValueError):
        return False
    return bool(results) and results[0]["value"][1] == "1"


if __name__ == "__main__":
    main()
