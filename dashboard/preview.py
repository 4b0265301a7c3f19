"""The preview of an on-sale's line before the sale (``/dashboard/events/{slug}/preview``):
its settings, or others to try, and an expected arrival curve, through the room's admission
rules on a simulated clock (``queueing/rules/forecast.py``). It changes nothing.

Every input is bounded (fans, minutes, the simulation's own horizon), so that no query can
make the server simulate for long: a preview costs at most a day of simulated ticks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django import forms
from django.conf import settings

from dashboard.charts import axis_chart_svg
from dashboard.report_scales import duration_text
from events.models import Event
from queueing.rules.forecast import ArrivalSegment, Forecast, ForecastInputs, forecast

MAX_FANS = 10_000_000
MAX_MINUTES = 24 * 60
MAX_LIMIT = 1_000_000  # capacity, rate and arrivals a minute
# A fan's time in the shop, before anyone says otherwise: half the session. Most fans need
# far less than the whole of it; some never finish, and the session ends them.
SHOP_SHARE_OF_SESSION = 0.5
EXAMPLE_FANS, EXAMPLE_MINUTES = 50_000, 10


class PreviewForm(forms.Form):
    capacity = forms.IntegerField(
        min_value=0, max_value=MAX_LIMIT, help_text="Fans in the shop at once; 0 = no limit"
    )
    rate_per_minute = forms.IntegerField(
        min_value=0, max_value=MAX_LIMIT, label="Rate per minute", help_text="0 = no limit"
    )
    session_seconds = forms.IntegerField(
        min_value=1,
        max_value=86_400,
        label="Session (s)",
        help_text="A fan let in is out after this at the latest",
    )
    shop_minutes = forms.FloatField(
        min_value=0.05,
        max_value=MAX_MINUTES,
        label="Time in the shop (min)",
        help_text="How long a fan stays in the shop on average, from being let in to done "
        "(exponential). Prefilled with half the session: most fans need less than all of it.",
    )
    prequeue_fans = forms.IntegerField(
        min_value=0, max_value=MAX_FANS, label="Fans in the pre-queue at the start"
    )
    fans = forms.IntegerField(min_value=0, max_value=MAX_FANS, label="Fans arriving after it")
    over_minutes = forms.FloatField(
        min_value=0.1,
        max_value=MAX_MINUTES,
        label="…evenly over the first (min)",
    )
    tail_per_minute = forms.FloatField(
        min_value=0,
        max_value=MAX_LIMIT,
        label="Then, fans a minute",
        help_text="Who keep coming after that; 0 = nobody",
    )
    abandon_percent = forms.FloatField(min_value=0, max_value=90, label="Give up while waiting (%)")

    SETTINGS = ("capacity", "rate_per_minute", "session_seconds", "shop_minutes")
    ARRIVALS = ("prequeue_fans", "fans", "over_minutes", "tail_per_minute", "abandon_percent")

    def settings_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.SETTINGS]

    def arrival_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.ARRIVALS]

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if not self.errors and not (data.get("fans") or data.get("prequeue_fans")):
            raise forms.ValidationError("Expect at least one fan, in the pre-queue or after.")
        return data

    def inputs(self) -> ForecastInputs:
        data = self.cleaned_data
        return ForecastInputs(
            capacity=data["capacity"],
            rate_per_minute=data["rate_per_minute"],
            session_seconds=data["session_seconds"],
            shop_seconds=data["shop_minutes"] * 60,
            prequeue_fans=data["prequeue_fans"],
            arrivals=(ArrivalSegment(minutes=data["over_minutes"], fans=data["fans"]),),
            tail_per_minute=data["tail_per_minute"],
            abandon_share=data["abandon_percent"] / 100,
            tick_seconds=settings.WR_TICK_SECONDS,
            batch_limit=settings.WR_ADMISSION_BATCH,
            burst_seconds=settings.WR_ADMISSION_BURST_SECONDS,
        )


def preview_initial(event: Event) -> dict[str, object]:
    """The on-sale's own settings, and an example curve to start from."""
    return {
        "capacity": event.capacity,
        "rate_per_minute": event.rate_per_minute,
        "session_seconds": event.session_seconds,
        "shop_minutes": round(event.session_seconds * SHOP_SHARE_OF_SESSION / 60, 2),
        "prequeue_fans": 0,
        "fans": EXAMPLE_FANS,
        "over_minutes": EXAMPLE_MINUTES,
        "tail_per_minute": 0,
        "abandon_percent": 0,
    }


def preview_form(event: Event, query: Mapping[str, str]) -> PreviewForm:
    """The form bound to what was asked; what was not (a first visit, the admin's link with
    the settings only) is the on-sale's own settings and the example curve. Other query
    parameters are ignored."""
    asked = {name: query[name] for name in PreviewForm.base_fields if name in query}
    return PreviewForm(preview_initial(event) | asked)


@dataclass(frozen=True)
class PreviewFigures:
    fans: str
    peak_line: str
    first_wait: str
    median_wait: str
    p90_wait: str
    last_wait: str
    empty_at: str
    pace: str
    chart: str


def preview_figures(result: Forecast) -> PreviewFigures:
    never = f"not within {duration_text(result.horizon_seconds)}"
    return PreviewFigures(
        fans=f"{result.fans:,}",
        peak_line=f"{result.peak_line:,}",
        first_wait=_wait_text(result.first_wait, never),
        median_wait=_wait_text(result.median_wait, never),
        p90_wait=_wait_text(result.p90_wait, never),
        last_wait=_wait_text(result.last_wait, never),
        empty_at=_wait_text(result.empty_at, never),
        pace=f"{result.pace_per_minute:,.0f}" if result.pace_per_minute is not None else "no limit",
        chart=line_chart(result),
    )


def _wait_text(seconds: float | None, never: str) -> str:
    return duration_text(seconds) if seconds is not None else never


# Round spans for the time axis: the first that gives at most six ticks.
_TICK_SPANS = (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)


def line_chart(result: Forecast) -> str:
    samples = result.samples
    values = [round(s.in_line) for s in samples]
    ticks: list[tuple[int, str]] = []
    if len(samples) > 1:
        spacing = samples[1].second - samples[0].second
        end = samples[-1].second
        span = next((s for s in _TICK_SPANS if end / s <= 6), _TICK_SPANS[-1])
        ticks = [
            (round(k * span / spacing), duration_text(k * span))
            for k in range(int(end // span) + 1)
            # The last label would run off the chart's right edge.
            if k * span <= end - span / 3 or k == 0
        ]
    return axis_chart_svg(
        values,
        kind="curve",
        label="Expected fans in line over time",
        summary=f"The line peaks at {result.peak_line:,} fans; "
        + (
            f"it is empty {duration_text(result.empty_at)} after the start."
            if result.empty_at is not None
            else "it is not empty within the preview's horizon."
        ),
        x_ticks=ticks,
        x_title="time after the start",
        y_title="fans in line",
    )


def preview(form: PreviewForm) -> PreviewFigures:
    return preview_figures(forecast(form.inputs()))
