"""The rehearsal's judgement of quotes (rehearsal/figures.py). Pure."""

from __future__ import annotations

import pytest

from rehearsal.figures import FanOutcome, line_length_over_time, quote_figures, rose, tier_figures


def fan(quote, waited, *, tier="General", key=0, shown=(), arrived=0.0, left_at=None):
    return FanOutcome(
        tier=tier,
        prequeue=False,
        arrived_at=arrived,
        quote=quote,
        quoted_at=arrived if quote else None,
        admitted_at=None if waited is None else arrived + waited,
        order_key=key,
        shown_p50=shown,
        left_at=left_at,
    )


def test_coverage_counts_waits_inside_the_first_range() -> None:
    fans = [
        fan((5, 10, 15), 12),
        fan((5, 10, 15), 15),  # on the edge: inside
        fan((5, 10, 15), 16),
        fan((5, 10, 15), 4),
        fan(None, 3),  # never quoted: not judged
        fan((5, 10, 15), None),  # never admitted: not judged
    ]
    figures = quote_figures(fans)
    assert figures["quoted_and_admitted"] == 4
    assert figures["coverage"] == pytest.approx(0.5)
    assert (figures["below_p10"], figures["above_p90"]) == (1, 1)
    assert figures["median_signed_error_s"] == pytest.approx(3.5)


def test_a_rise_is_over_the_lowest_estimate_shown_before() -> None:
    assert not rose([(0, 60), (1, 55), (2, 50)])
    assert not rose([(0, 2), (1, 3)])  # a second's tick is not a broken promise
    assert rose([(0, 60), (1, 40), (2, 50)])  # 50 > 40 × 1.2 + 1
    assert not rose([(0, 60), (1, 50), (2, 60)])  # 60 < 50 × 1.2 + 1


def test_inversions_per_tier_by_order_key() -> None:
    fans = [
        fan(None, 1.0, key=1),
        fan(None, 3.0, key=2),
        fan(None, 2.0, key=3),  # admitted before key 2
        fan(None, 1.0, key=9, tier="Fan club"),
    ]
    tiers = tier_figures(fans, line_started=0.0)
    assert tiers["General"]["inversions"] == 1
    assert tiers["Fan club"]["inversions"] == 0


def test_line_length_counts_who_has_arrived_and_is_not_yet_out() -> None:
    fans = [
        fan(None, 10.0, arrived=0.0),
        fan(None, None, arrived=2.0, left_at=5.0),
        fan(None, 2.0, arrived=4.0),
    ]
    samples = dict(line_length_over_time(fans, start=0.0, end=12.0, points=12))
    assert (samples[1.0], samples[4.0], samples[5.0], samples[7.0], samples[11.0]) == (
        1,
        3,
        2,
        1,
        0,
    )


def test_the_page_draws_every_quoted_fan_and_says_the_verdict() -> None:
    from rehearsal.report_html import render

    fans = [fan((5, 10, 15), 12), fan((5, 10, 15), 20, arrived=1.0)]
    scenario = {
        "title": "Steady <small>",
        "verdict": {"coverage_met": False, "rises_judged": True, "rises_met": True},
        "figures": {
            "quotes": quote_figures(fans),
            "throughput": {"admitted_per_s": 2.0},
            "tiers": tier_figures(fans, line_started=0.0),
            "line": line_length_over_time(fans, start=0.0, end=20.0),
        },
        "fans": [{"quote": f.quote, "quoted_at": f.quoted_at, "waited": f.waited} for f in fans],
    }
    page = render({"date": "today", "scenarios": [scenario]})
    assert "Steady &lt;small&gt;" in page  # escaped
    assert page.count("<circle") == 2
    assert 'fill="#15803d"' in page and 'fill="#b91c1c"' in page  # inside, outside
    assert "Targets missed: coverage under 80%; rises under 10%." in page
    assert "<polyline" in page


def test_rises_are_pooled_over_the_scenarios_where_they_are_judged() -> None:
    from rehearsal.run import benchmarks_section

    def scenario(name: str, shown: list[list[tuple[float, float]]], judged: bool) -> dict:
        fans = [fan((5, 10, 15), 12, shown=s) for s in shown]
        return {
            "name": name,
            "settings": {"rate_per_minute": 0},
            "verdict": {"coverage_met": True, "rises_judged": judged, "rises_met": True},
            "figures": {
                "fans": len(fans),
                "quotes": quote_figures(fans),
                "throughput": {"admitted_per_s": 2.0, "shop_pace_per_s": 2.0},
                "tiers": tier_figures(fans, line_started=0.0),
            },
        }

    rising, steady = [(0, 10), (1, 30)], [(0, 10), (1, 9)]
    results = {
        "date": "today",
        "scenarios": [
            scenario("steady", [steady, steady, rising], judged=True),
            scenario("slowdown", [rising, steady, [(0, 10)]], judged=True),  # one shown once
            scenario("changes", [rising, rising], judged=False),  # staff cut the pace
        ],
    }
    section = benchmarks_section(results)
    assert "Rises where staff did not cut the pace: 2 of the 5 fans" in section
    assert "(40.0%)" in section
