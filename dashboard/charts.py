"""Small server-rendered SVG charts for the dashboard. Pure: values in, markup out."""

from __future__ import annotations

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
