"""The report's scales and charts: pure, no database."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from dashboard.charts import axis_chart_svg, nice_top
from dashboard.report_scales import MAX_BINS, MAX_BUCKETS, duration_text, timeline, wait_bin_seconds
from dashboard.templatetags.report_format import count, percent, tau

START = datetime(2026, 3, 14, 18, 0, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("span", "seconds"),
    [
        (timedelta(0), 10),
        (timedelta(minutes=5), 10),
        (timedelta(minutes=30), 30),
        (timedelta(hours=3), 2 * 60),
        (timedelta(hours=24), 15 * 60),
        (timedelta(days=6), 2 * 3600),
        (timedelta(days=400), 4 * 86400),
    ],
)
def test_buckets_are_round_and_at_most_120(span: timedelta, seconds: int) -> None:
    scale = timeline(START, START + span)
    assert scale.seconds == seconds
    assert scale.origin <= START < scale.origin + timedelta(seconds=seconds)
    assert scale.start(scale.count) > START + span
    assert 1 <= scale.count <= MAX_BUCKETS


def test_wait_bins_are_round_and_at_most_40() -> None:
    assert wait_bin_seconds(0) == 1
    assert wait_bin_seconds(155) == 5
    assert wait_bin_seconds(3600) == 120
    for longest in (1, 59, 61, 7199, 86400 * 3, 10**9):
        width = wait_bin_seconds(longest)
        assert longest // width + 1 <= MAX_BINS


def test_durations_and_figures_read_as_people_say_them() -> None:
    assert [duration_text(s) for s in (None, 0, 45, 119.6, 125, 754, 3600, 90000, 200000)] == [
        "—",
        "0 s",
        "45 s",
        "2 min",
        "2 min 05 s",
        "12 min",
        "1 h 00 min",
        "25 h 00 min",
        "2 d 7 h",
    ]
    assert (count(1_234_567), count(None), count("")) == ("1,234,567", "—", "—")
    assert (percent(2 / 3), percent(None), tau(1 - 2 / 7), tau("")) == (
        "66.7 %",
        "—",
        "0.714",
        "—",
    )


def test_axis_tops_are_round_with_a_whole_half() -> None:
    assert [nice_top(v) for v in (0, 1, 3, 10, 11, 130, 999, 1_000_001)] == [
        1,
        2,
        4,
        10,
        12,
        160,
        1000,
        1_200_000,
    ]


@pytest.mark.parametrize("kind", ["bars", "line", "curve"])
@pytest.mark.parametrize("values", [[], [0], [0, 0], [3, 1_000_000, 7], list(range(120))])
def test_charts_are_valid_svg_with_title_and_description(kind: str, values: list[int]) -> None:
    svg = axis_chart_svg(
        values,
        kind=kind,
        label="Arrivals <per> 10 s",
        summary="A & B",
        x_ticks=[(0, "18:00"), (len(values), "18:20")],
        x_title="Time",
        y_title="Fans",
    )
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.get("aria-label") == "Arrivals <per> 10 s" == root.find(f"{ns}title").text
    assert root.find(f"{ns}desc").text == "A & B"
    if kind == "bars":
        assert len(root.findall(f"{ns}rect")) == sum(1 for v in values if v)


def test_a_curve_runs_from_edge_to_edge_through_each_value() -> None:
    """Samples over time (the preview's line): the first at the left edge, the last at the
    right, and a tick's index is a sample's."""
    svg = axis_chart_svg(
        [0, 10, 5],
        kind="curve",
        label="Line",
        summary="",
        x_ticks=[(1, "mid")],
        x_title="Time",
        y_title="Fans",
    )
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg)
    points = root.find(f"{ns}polyline").get("points").split()
    xs = [float(p.split(",")[0]) for p in points]
    assert len(points) == 3 and xs[1] - xs[0] == pytest.approx(xs[2] - xs[1])
    tick = next(t for t in root.findall(f"{ns}text") if t.text == "mid")
    assert float(tick.get("x")) == pytest.approx(xs[1], abs=0.1)
