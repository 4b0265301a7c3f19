"""The rehearsal's HTML page: per scenario its figures, the quoted range against the real wait
of every fan (SVG), and the line's length over time. Pure: results in, markup out."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from dashboard.charts import axis_chart_svg, nice_top

WIDTH, HEIGHT, LEFT, BOTTOM = 720, 220, 44, 22

_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:780px;color:#111827}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2.2rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{padding:.2rem .6rem;text-align:left;
border-bottom:1px solid #e5e7eb}th{font-weight:600}.met{color:#15803d}.missed{color:#b91c1c}
svg{background:#f9fafb;border:1px solid #e5e7eb}figcaption{color:#4b5563;font-size:.85rem}
"""


def _axis(top: float, label: str) -> str:
    ticks = []
    for i in range(5):
        value = top * i / 4
        y = HEIGHT - BOTTOM - (HEIGHT - BOTTOM - 8) * i / 4
        ticks.append(
            f'<line x1="{LEFT}" x2="{WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>'
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10">'
            f"{value:g}</text>"
        )
    return "".join(ticks) + (
        f'<text x="{LEFT}" y="{HEIGHT - 4}" font-size="10">{html.escape(label)}</text>'
    )


def _y(value: float, top: float) -> float:
    return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - 8) * min(value, top) / top


def quotes_svg(fans: Sequence[dict[str, Any]]) -> str:
    """One column per admitted, quoted fan in the order they were quoted: the grey bar is the
    p10–p90 range, the dot the real wait (green inside the range, red outside)."""
    judged = [f for f in fans if f.get("quote") and f.get("waited") is not None]
    if not judged:
        return "<p>No fan was both quoted and admitted.</p>"
    judged.sort(key=lambda f: f["quoted_at"])
    top = nice_top(max(max(f["quote"][2], f["waited"]) for f in judged))
    step = (WIDTH - LEFT - 4) / len(judged)
    marks = []
    for i, fan in enumerate(judged):
        x = LEFT + 2 + i * step + step / 2
        p10, _, p90 = fan["quote"]
        inside = p10 <= fan["waited"] <= p90
        marks.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_y(p10, top):.1f}" y2="{_y(p90, top):.1f}" '
            f'stroke="#9ca3af" stroke-width="{max(1.0, step * 0.6):.1f}"/>'
            f'<circle cx="{x:.1f}" cy="{_y(fan["waited"], top):.1f}" r="{min(3.0, step):.1f}" '
            f'fill="{"#15803d" if inside else "#b91c1c"}"/>'
        )
    return (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        'aria-label="Quoted range and real wait per fan">'
        + _axis(top, "seconds; fans in the order they were quoted →")
        + "".join(marks)
        + "</svg>"
    )


def line_svg(samples: Sequence[Sequence[float]]) -> str:
    """Fans in line over time: the dashboard's own chart (``dashboard/charts.py``)."""
    if not samples:
        return ""
    ticks = [
        (index, f"{float(samples[index][0]):g} s")
        for index in range(0, len(samples), max(1, len(samples) // 4))
    ]
    peak = max(int(n) for _, n in samples)
    return axis_chart_svg(
        [float(n) for _, n in samples],
        kind="line",
        label="Fans in line over time",
        summary=f"The line peaked at {peak} fans.",
        x_ticks=ticks,
        x_title="seconds after the start",
        y_title="fans in line",
    )


def _figure_rows(figures: dict[str, Any]) -> str:
    rows = []
    for key, value in figures.items():
        if isinstance(value, dict):
            continue
        rows.append(f"<tr><th>{html.escape(key)}</th><td>{html.escape(str(value))}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _tier_rows(tiers: dict[str, dict[str, Any]]) -> str:
    head = "<tr><th>tier</th><th>fans</th><th>admitted</th><th>left</th><th>wait p50 / p90 (s)"
    head += "</th><th>inversions</th></tr>"
    rows = [
        f"<tr><td>{html.escape(name)}</td><td>{t['fans']}</td><td>{t['admitted']}</td>"
        f"<td>{t['left']}</td><td>{t['wait_s'].get('p50', '—')} / {t['wait_s'].get('p90', '—')}"
        f"</td><td>{t['inversions']}</td></tr>"
        for name, t in tiers.items()
    ]
    return "<table>" + head + "".join(rows) + "</table>"


def render(results: dict[str, Any]) -> str:
    parts = [
        "<!doctype html><html lang=en><meta charset=utf-8>",
        "<title>Rehearsal</title>",
        f"<style>{_STYLE}</style>",
        "<h1>Rehearsal of the waiting room</h1>",
        f"<p>{html.escape(results.get('date', ''))}; the targets: coverage ≥ 80% in every "
        "scenario, rises under 10% where staff did not cut the pace.</p>",
    ]
    for scenario in results["scenarios"]:
        quotes = scenario["figures"]["quotes"]
        parts += [
            f"<h2>{html.escape(scenario['title'])}</h2>",
            _verdict(scenario),
            _figure_rows(quotes),
            _figure_rows(scenario["figures"]["throughput"]),
            _tier_rows(scenario["figures"]["tiers"]),
            "<figure>",
            quotes_svg(scenario["fans"]),
            "<figcaption>Grey: the range quoted when the fan was first shown one; dot: the "
            "real wait (green inside, red outside).</figcaption></figure>",
            "<figure>",
            line_svg(scenario["figures"]["line"]),
            "<figcaption>Fans in line over time.</figcaption></figure>",
        ]
    return "\n".join(parts) + "\n</html>\n"


def _verdict(scenario: dict[str, Any]) -> str:
    verdict = scenario["verdict"]
    met = verdict["coverage_met"] and verdict["rises_met"]
    coverage = "coverage ≥ 80%" if verdict["coverage_met"] else "coverage under 80%"
    if not verdict["rises_judged"]:
        rises = "rises not judged (staff cut the pace)"
    else:
        rises = "rises under 10%" if verdict["rises_met"] else "rises 10% or more"
    words = "Targets met" if met else "Targets missed"
    return f'<p class="{"met" if met else "missed"}">{words}: {coverage}; {rises}.</p>'
