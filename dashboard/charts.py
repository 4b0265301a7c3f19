"""Small server-rendered SVG charts for the dashboard. Pure: values in, markup out."""

from __future__ import annotations

import math
from collections.abc import Sequence

from django.utils.html import escape

WIDTH, HEIGHT, PAD = 360, 90, 4


def _scale(values: Sequence[float | None]) -> float:
    return max([v for v in values if v is not None] + [1])


def bars_svg(values: Sequence[float | None], *, label: str, color: str = "#15803d") -> str:
    """One bar per minute, oldest first; missing minutes are gaps."""
    top = _scale(values)
    step = (WIDTH - 2 * PAD) / max(1, len(values))
    bars = []
    for i, value in enumerate(values):
        if not value:
            continue
        height = (HEIGHT - 2 * PAD) * value / top
        bars.append(
            f'<rect x="{PAD + i * step:.1f}" y="{HEIGHT - PAD - height:.1f}" '
            f'width="{max(1.0, step - 1):.1f}" height="{height:.1f}" fill="{color}"/>'
        )
    return _frame(label, top, "".join(bars))


def line_svg(values: Sequence[float | None], *, label: str, color: str = "#1d4ed8") -> str:
    top = _scale(values)
    step = (WIDTH - 2 * PAD) / max(1, len(values) - 1)
    points = [
        f"{PAD + i * step:.1f},{HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top:.1f}"
        for i, value in enumerate(values)
        if value is not None
    ]
    if len(points) > 1:
        path = (
            f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(points)}"/>'
        )
    elif points:
        x, y = points[0].split(",")
        path = f'<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>'
    else:
        path = ""
    return _frame(label, top, path)


def _frame(label: str, top: float, body: str) -> str:
    # The scale label is drawn last, so that no bar covers it.
    return (
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}" '
        f'class="chart" preserveAspectRatio="none">'
        f"<title>{escape(label)}</title>"
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        f'stroke="#9ca3af"/>'
        f"{body}"
        f'<text x="{PAD + 2}" y="12" font-size="10" fill="#4a4a4a">max {top:g}</text></svg>'
    )


# Charts with axes, for the report after the sale (dashboard/sale_report.py). Drawn in dark
# greys on white and labelled in words, so that they read the same printed in black and
# white; the text keeps its shape because the picture scales as a whole (no
# preserveAspectRatio="none").
AXIS_WIDTH, AXIS_HEIGHT = 720, 230
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 14, 44
INK, GRID, MUTED = "#111827", "#d1d5db", "#374151"


def nice_top(value: float) -> float:
    """The top of a value axis at least ``value`` whose half is a whole number as well: an
    even number up to 10, then 1, 1.2, 1.6, 2, 3, 4, 5, 6, 8 or 10 times a power of ten; 1
    for nothing at all."""
    if value <= 0:
        return 1
    if value <= 10:
        return 2 * math.ceil(value / 2)
    power = 10 ** (len(str(int(value))) - 1)
    for step in (1, 1.2, 1.6, 2, 3, 4, 5, 6, 8, 10):
        if value <= step * power:
            return round(step * power)
    return 10 * power  # pragma: no cover (the loop ends at ten times the power)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"


def axis_chart_svg(
    values: Sequence[float],
    *,
    kind: str,
    label: str,
    summary: str,
    x_ticks: Sequence[tuple[int, str]],
    x_title: str,
    y_title: str,
    css_class: str = "report-chart",
    width: int = AXIS_WIDTH,
) -> str:
    """``values`` as bars (``kind="bars"``), a stepped line (``"line"``), one slot each, or a
    curve through them (``"curve"``: samples of something over time, the first at the left
    edge and the last at the right), with a value axis (0, half, top), ``x_ticks`` (slot or
    sample index, text) under them, and titles.
    ``summary`` is the chart said in words (its ``<desc>``), for screen readers. A narrower
    ``width`` keeps the text legible where the chart is shown small (histograms side by side)."""
    top = nice_top(max(values, default=0))
    plot_w, plot_h = width - LEFT - RIGHT, AXIS_HEIGHT - TOP - BOTTOM
    slots = max(1, len(values) - (1 if kind == "curve" else 0))
    step = plot_w / slots
    base = TOP + plot_h

    def y(value: float) -> float:
        return base - plot_h * value / top

    parts = []
    for tick in (0, top / 2, top) if top > 1 else (0, top):
        parts.append(
            f'<line x1="{LEFT}" y1="{y(tick):.1f}" x2="{width - RIGHT}" y2="{y(tick):.1f}" '
            f'stroke="{GRID if tick else INK}"/>'
            f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{_number(tick)}</text>'
        )
    if kind == "bars":
        gap = 1.0 if step > 3 else 0.0
        for i, value in enumerate(values):
            if value > 0:
                parts.append(
                    f'<rect x="{LEFT + i * step:.2f}" y="{y(value):.2f}" '
                    f'width="{max(0.6, step - gap):.2f}" height="{base - y(value):.2f}" '
                    f'fill="{MUTED}"/>'
                )
    elif kind == "curve" and values:
        points = [f"{LEFT + i * step:.2f},{y(value):.2f}" for i, value in enumerate(values)]
        parts.append(
            f'<polyline fill="none" stroke="{INK}" stroke-width="2" stroke-linejoin="round" '
            f'points="{" ".join(points)}"/>'
        )
    elif values:
        # A step for each slot: the value held through it.
        points = []
        for i, value in enumerate(values):
            points.append(f"{LEFT + i * step:.2f},{y(value):.2f}")
            points.append(f"{LEFT + (i + 1) * step:.2f},{y(value):.2f}")
        parts.append(
            f'<polyline fill="none" stroke="{INK}" stroke-width="2" points="{" ".join(points)}"/>'
        )
    for index, text in x_ticks:
        x = LEFT + index * step
        parts.append(
            f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="{INK}"/>'
            f'<text x="{x:.1f}" y="{base + 16}" text-anchor="middle">{escape(text)}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{AXIS_HEIGHT - 6}" text-anchor="middle" '
        f'class="axis-title">{escape(x_title)}</text>'
        f'<text transform="translate(14 {TOP + plot_h / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle" class="axis-title">{escape(y_title)}</text>'
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {AXIS_HEIGHT}" '
        f'role="img" aria-label="{escape(label)}" class="{css_class}" '
        f'font-family="system-ui, sans-serif" font-size="12" fill="{INK}">'
        f"<title>{escape(label)}</title><desc>{escape(summary)}</desc>"
        f"{''.join(parts)}</svg>"
    )
