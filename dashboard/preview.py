"""The preview of an on-sale's line before the sale (``/dashboard/events/{slug}/preview``):
its settings, or others to try, and an expected arrival curve, through the room's admission
rules on a simulated clock (``queueing/rules/forecast.py``). It changes nothing."""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.conf import settings

from dashboard.charts import axis_chart_svg
from dashboard.report_scales import duration_text
from events.models import Event
from queueing.rules.forecast import ArrivalSegment, Forecast, ForecastInputs, forecast

MAX_FANS = 10_000_000
MAX_MINUTES = 24 * 60


class PreviewForm(forms.Form):
    capacity = forms.IntegerField(min_value=0, max_value=1_000_000, help_text="0 = no limit")
    rate_per_minute = forms.IntegerField(
        min_value=0, max_value=1_000_000, label="Rate per minute", help_text="0 = no limit"
    )
    session_seconds = forms.IntegerField(min_value=1, max_value=86_400, label="Session (s)")
    shop_minutes = forms.FloatField(
        min_value=0.05,
        max_value=MAX_MINUTES,
        label="Time in the shop (min)",
        help_text="How long a fan stays in the shop on average, from being let in to done. "
        "Prefilled with half the session: most fans need less than all of it.",
    )
    prequeue_fans = forms.IntegerField(
        min_value=0, max_value=MAX_FANS, label="Fans in the pre-queue at the start"
    )
    fans = forms.IntegerField(
        min_value=0, max_value=MAX_FANS, label="Fans arriving after the start"
    )
    over_minutes = forms.FloatField(
        min_value=0.1, max_value=MAX_MINUTES, label="…over the first (min)"
    )
    abandon_percent = forms.FloatField(min_value=0, max_value=90, label="Give up while waiting (%)")

    SETTINGS = ("capacity", "rate_per_minute", "session_seconds", "shop_minutes")
    ARRIVALS = ("prequeue_fans", "fans", "over_minutes", "abandon_percent")

    def settings_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.SETTINGS]

    def arrival_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.ARRIVALS]

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if not self.errors and not (data.get("fans") or data.get("prequeue_fans")):
            raise forms.ValidationError("Expect at least one fan.")
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
        "shop_minutes": round(event.session_seconds / 2 / 60, 2),
        "prequeue_fans": 0,
        "fans": 50_000,
        "over_minutes": 10,
        "abandon_percent": 0,
    }


@dataclass(frozen=True)
class PreviewFigures:
    first_wait: str
    median_wait: str
    p90_wait: str
    last_wait: str
    empty_at: str
    peak_line: int
    fans: int
    chart: str


def preview_figures(result: Forecast) -> PreviewFigures:
    never = f"not within {duration_text(result.horizon_seconds)}"
    return PreviewFigures(
        first_wait=duration_text(result.first_wait),
        median_wait=duration_text(result.median_wait),
        p90_wait=duration_text(result.p90_wait),
        last_wait=duration_text(result.last_wait) if result.last_wait is not None else never,
        empty_at=f"{duration_text(result.empty_at)} after the start"
        if result.empty_at is not None
        else never,
        peak_line=result.peak_line,
        fans=result.fans,
        chart=line_chart(result),
    )


def line_chart(result: Forecast) -> str:
    samples = result.samples
    values = [round(s.in_line) for s in samples]
    end = samples[-1].second if samples else 0.0
    ticks = []
    if samples and end > 0:
        for share in (0.0, 0.25, 0.5, 0.75, 1.0):
            index = min(len(samples) - 1, round(share * (len(samples) - 1)))
            ticks.append((index, duration_text(samples[index].second)))
    return axis_chart_svg(
        values,
        kind="line",
        label="Expected fans in line over time",
        summary=f"The line peaks at {result.peak_line} fans; "
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
