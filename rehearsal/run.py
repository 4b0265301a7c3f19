"""`make rehearse`: the named scenarios against the real room, started here in its production
configuration (gunicorn with uvicorn workers, Celery worker and beat) on a database and Redis
database of its own, driven over loopback. Writes JSON and an HTML page with charts.

    .venv/bin/python rehearsal/run.py [--scenario steady --scenario surge] [--scale 0.5]
        [--base-url http://127.0.0.1:8000]   # a room already running, on this database

With ``--base-url`` nothing is started: the room must use the database this process is set up
with (DATABASE_URL), since the rehearsal creates its on-sales and reads the outcome there.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DB_NAME = os.environ.get("WR_REHEARSAL_DATABASE", "waitingroom_rehearsal")
REDIS_DB = int(os.environ.get("WR_REHEARSAL_REDIS_DB", "13"))


def rehearsal_env() -> dict[str, str]:
    from bench.environment import ENV

    return {
        **ENV,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
        "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        "CHANNELS_REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        "WR_REDIS_PREFIX": "rehearsal",
        "CHANNELS_PREFIX": "rehearsal:asgi",
        "CELERY_TASK_DEFAULT_QUEUE": "rehearsal",
    }


async def rehearse_all(names: list[str], scale: float, base_url: str) -> list[dict[str, Any]]:
    from rehearsal.rehearse import rehearse
    from rehearsal.scenarios import SCENARIOS

    results = []
    for name in names:
        scenario = SCENARIOS[name]
        if scale != 1.0:
            scenario = scenario.scaled(scale)
        results.append(await rehearse(scenario, base_url=base_url))
    return results


def main() -> None:
    from rehearsal.scenarios import SCENARIOS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the fans")
    parser.add_argument("--base-url", help="a room already running (nothing is started)")
    parser.add_argument("--out", type=Path, default=ROOT / ".run" / "rehearsal")
    parser.add_argument(
        "--benchmarks",
        action="store_true",
        help="also put the table in docs/benchmarks.md (make bench)",
    )
    options = parser.parse_args()
    names = options.scenario or list(SCENARIOS)

    if not options.base_url:
        from bench.environment import fresh_database

        os.environ.update(rehearsal_env())
        fresh_database(DB_NAME, rehearsal_env())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from rehearsal.report_html import render
    from tests.processes import Stack

    options.out.mkdir(parents=True, exist_ok=True)
    stack = None
    base_url = options.base_url
    if not base_url:
        logdir = options.out / "logs"
        shutil.rmtree(logdir, ignore_errors=True)
        logdir.mkdir()
        stack = Stack({**os.environ, "PYTHONUNBUFFERED": "1"}, logdir)
        base_url = stack.web_at_public_url(workers=2)
        stack.worker(concurrency=4)
        stack.beat()
    try:
        scenarios = asyncio.run(rehearse_all(names, options.scale, base_url))
    finally:
        if stack is not None:
            stack.stop()
    results = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "scale": options.scale,
        "scenarios": scenarios,
    }
    (options.out / "results.json").write_text(json.dumps(results, indent=1))
    (options.out / "report.html").write_text(render(results))
    print(f"wrote {options.out / 'results.json'} and {options.out / 'report.html'}")
    print(summary(scenarios))
    if options.benchmarks:
        benchmarks_section_write(ROOT / "docs" / "benchmarks.md", results)


BENCH_START = "<!-- rehearsals: written by rehearsal/run.py --benchmarks -->"
BENCH_END = "<!-- end of rehearsals -->"


def benchmarks_section(results: dict[str, Any]) -> str:
    lines = [
        BENCH_START,
        "## Rehearsals (issue 17)",
        "",
        f"`rehearsal/run.py --benchmarks` (the last step of `make bench`) on {results['date']}: "
        "synthetic fans through the real room (web, worker, beat) on loopback, each scenario on "
        "an on-sale of its own, on this shared 2-CPU machine while nothing else ran. "
        "Coverage: admitted fans whose real wait fell inside the p10–p90 range they were "
        "first shown (target ≥ 80%); rises: fans whose shown p50 went up by more than 20% "
        "(target < 10% where staff did not cut the pace); throughput against the pace that binds "
        "at the start (the rate, or capacity / mean checkout), measured in the same run.",
        "",
        "| scenario | fans | coverage | median / p90 error | rises | admitted/s | against pace "
        "| inversions | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in results["scenarios"]:
        q, t, v = s["figures"]["quotes"], s["figures"]["throughput"], s["verdict"]
        settings = s["settings"]
        limits = [
            settings["rate_per_minute"] / 60 if settings["rate_per_minute"] else None,
            t["shop_pace_per_s"],
        ]
        pace = min((limit for limit in limits if limit), default=None)
        ratio = round(t["admitted_per_s"] / pace, 2) if t["admitted_per_s"] and pace else None
        rises = f"{q['rises_share']}" + ("" if v["rises_judged"] else " (staff cut)")
        inversions = sum(tier["inversions"] for tier in s["figures"]["tiers"].values())
        met = "yes" if v["coverage_met"] and v["rises_met"] else "no"
        lines.append(
            f"| {s['name']} | {s['figures']['fans']} | {q['coverage']} | "
            f"{q['median_error_s']} / {q['p90_error_s']} s | {rises} | {t['admitted_per_s']} | "
            f"{ratio} | {inversions} | {met} |"
        )
    quoted = [s["figures"]["quotes"] for s in results["scenarios"]]
    judged = sum(q["quoted_and_admitted"] for q in quoted)
    inside = sum(round(q["coverage"] * q["quoted_and_admitted"]) for q in quoted if q["coverage"])
    if judged:
        mean = sum(q["coverage"] or 0 for q in quoted) / len(quoted)
        lines += [
            "",
            f"Across the scenarios: {inside / judged:.1%} of the {judged:,} quoted and admitted "
            f"fans inside their range; {mean:.1%} on average over the scenarios.",
        ]
    # Rises where they are judged (staff did not cut the pace), pooled as coverage is.
    rises_judged = [
        s["figures"]["quotes"] for s in results["scenarios"] if s["verdict"]["rises_judged"]
    ]
    shown = sum(q["shown_twice"] for q in rises_judged)
    if shown:
        rose = sum(q["rises"] for q in rises_judged)
        lines += [
            f"Rises where staff did not cut the pace: {rose:,} of the {shown:,} fans shown more "
            f"than one estimate ({rose / shown:.1%}).",
        ]
    lines += ["", BENCH_END]
    return "\n".join(lines)


def benchmarks_section_write(path: Path, results: dict[str, Any]) -> None:
    text = path.read_text()
    section = benchmarks_section(results)
    if BENCH_START in text and BENCH_END in text:
        before = text[: text.index(BENCH_START)]
        after = text[text.index(BENCH_END) + len(BENCH_END) :]
        text = before + section + after
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def summary(scenarios: list[dict[str, Any]]) -> str:
    lines = [
        f"{'scenario':10} {'coverage':>8} {'med err':>8} {'p90 err':>8} {'rises':>6} "
        f"{'thru/s':>7} {'targets':>8}"
    ]
    for s in scenarios:
        q = s["figures"]["quotes"]
        t = s["figures"]["throughput"]
        v = s["verdict"]
        met = "met" if v["coverage_met"] and v["rises_met"] else "MISSED"
        lines.append(
            f"{s['name']:10} {q['coverage']!s:>8} {q['median_error_s']!s:>8} "
            f"{q['p90_error_s']!s:>8} {q['rises_share']!s:>6} {t['admitted_per_s']!s:>7} "
            f"{met:>8}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
