"""Times shown to fans, in the fan's own time zone with the zone named.

The server knows no fan's zone: it writes the time in UTC and says so ("18:30 UTC"), inside a
``<time>`` element that queueing/static/queueing/local_times.js rewrites in the browser's own
zone, named by the browser ("19:30 CET"). A page without its script keeps the UTC one: every
time a fan sees is either in their zone or names the zone it is in."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

# What the page shows of a time: a date and time (a start days away), or the time alone (an
# end within the hour). The script keeps the same choice (data-local).
_FORMATS = {"datetime": "DATETIME_FORMAT", "time": "TIME_FORMAT"}


@register.filter
def fan_time(moment: datetime | None, style: str = "datetime") -> SafeString | str:
    """``{{ event.starts_at|fan_time }}``, ``{{ until|fan_time:"time" }}``."""
    if moment is None:
        return ""
    style = style if style in _FORMATS else "datetime"
    utc = moment.astimezone(UTC)
    return format_html(
        '<time datetime="{}" data-local="{}">{} UTC</time>',
        utc.isoformat().replace("+00:00", "Z"),
        style,
        date_format(utc, _FORMATS[style]),
    )
