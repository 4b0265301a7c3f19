"""How the report writes its figures: counts with thousands separators, shares as percent,
durations in words, and a dash for a figure that has no value (nobody admitted, no quotes,
a tier nobody was let in from: a missing attribute reaches a filter as "")."""

from __future__ import annotations

from django import template

from dashboard.report_scales import duration_text

register = template.Library()

NONE = "—"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


@register.filter
def count(value: object) -> str:
    number = _number(value)
    return NONE if number is None else f"{number:,.0f}"


@register.filter
def percent(value: object) -> str:
    number = _number(value)
    return NONE if number is None else f"{100 * number:.1f} %"


@register.filter
def duration(value: object) -> str:
    return duration_text(_number(value))


@register.filter
def tau(value: object) -> str:
    number = _number(value)
    return NONE if number is None else f"{number:.3f}"
