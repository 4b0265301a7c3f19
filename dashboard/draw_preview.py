"""The preview of a draw's outcome, on the preview page beside the line's: from the
registrations staff expect, how many get in with the draw's own invitations and how many
waitlist rounds fill the winners' places (``queueing/rules/draw_forecast.py``). It reads the
on-sale's registration window, if it has one, to start from, and writes nothing.

Its fields carry the prefix ``draw`` so that the line's form and this one share one query
string: each form sends the other's values along, hidden, and neither forgets what was tried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django import forms

from dashboard.report_scales import duration_text
from events.models import Event
from queueing.models import RegistrationWindow
from queueing.rules.draw_forecast import DrawForecast, DrawForecastInputs, draw_forecast

PREFIX = "draw"
MAX_REGISTRATIONS = 10_000_000
# As the staff API's window (staff/registration_api.py).
MAX_WINNERS = 10_000_000
MAX_INVITATION_HOURS = 24 * 30
# Rounds listed on the page; the figures count them all.
ROUNDS_SHOWN = 8
EXAMPLE = {
    "registrations": 20_000,
    "confirmed_percent": 80,
    "winners": 1_000,
    "waitlist": 500,
    "use_percent": 85,
    "invitation_hours": 48,
}


class DrawPreviewForm(forms.Form):
    registrations = forms.IntegerField(
        min_value=0,
        max_value=MAX_REGISTRATIONS,
        label="Registrations expected",
        help_text="In one tier: winners and waitlist are per tier",
    )
    confirmed_percent = forms.FloatField(
        min_value=0,
        max_value=100,
        label="Who confirm (%)",
        help_text="Addresses whose link is opened before the close; a shop's fans all count",
    )
    winners = forms.IntegerField(min_value=0, max_value=MAX_WINNERS, label="Winners")
    waitlist = forms.IntegerField(min_value=0, max_value=MAX_WINNERS, label="Waitlist")
    use_percent = forms.FloatField(
        min_value=0,
        max_value=100,
        label="Who use their invitation (%)",
        help_text="Before it lapses; each lapse invites the next waitlisted fan",
    )
    invitation_hours = forms.IntegerField(
        min_value=1, max_value=MAX_INVITATION_HOURS, label="An invitation lasts (h)"
    )

    def inputs(self) -> DrawForecastInputs:
        data = self.cleaned_data
        return DrawForecastInputs(
            registrations=data["registrations"],
            confirmed_share=data["confirmed_percent"] / 100,
            winners=data["winners"],
            waitlist=data["waitlist"],
            use_share=data["use_percent"] / 100,
            invitation_hours=data["invitation_hours"],
        )


def draw_preview_initial(event: Event) -> dict[str, object]:
    """The window's own winners, waitlist and invitation hours when it has one; the example
    otherwise."""
    window = (
        RegistrationWindow.objects.filter(event=event)
        .only("winners", "waitlist", "invitation_hours")
        .first()
    )
    if window is None:
        return dict(EXAMPLE)
    return EXAMPLE | {
        "winners": window.winners,
        "waitlist": window.waitlist,
        "invitation_hours": window.invitation_hours,
    }


def draw_preview_form(event: Event, query: Mapping[str, str]) -> DrawPreviewForm:
    """Bound to what was asked (``draw-…`` in the query), the rest from the window."""
    initial = {f"{PREFIX}-{name}": value for name, value in draw_preview_initial(event).items()}
    asked = {name: query[name] for name in initial if name in query}
    return DrawPreviewForm(initial | asked, prefix=PREFIX)


def fans_text(value: float) -> str:
    """Expected fans: whole when they are (to a tenth), else to a tenth, so that figures
    rounded apart never contradict each other (3.5 used and 0.5 left, not 4 and 0)."""
    if abs(value - round(value)) < 0.05:
        return f"{round(value):,}"
    return f"{value:,.1f}"


@dataclass(frozen=True)
class RoundShown:
    number: int
    when: str
    invited: str
    used: str
    lapsed: str


@dataclass(frozen=True)
class DrawPreviewFigures:
    confirmed: str
    places: str
    waitlisted: str
    lost: str
    first_round_in: str
    used: str
    rounds_to_fill: str
    unfilled: str
    settled_after: str
    rounds: list[RoundShown]
    more_rounds: int


def draw_preview_figures(result: DrawForecast) -> DrawPreviewFigures:
    if result.rounds_to_fill is None:
        to_fill = "never: the waitlist runs dry"
    elif result.rounds_to_fill == 0:
        to_fill = "none: filled at the draw"
    else:
        to_fill = f"{result.rounds_to_fill:,}"
    return DrawPreviewFigures(
        confirmed=fans_text(result.confirmed),
        places=fans_text(result.places),
        waitlisted=fans_text(result.waitlisted),
        lost=fans_text(result.lost),
        first_round_in=fans_text(result.first_round_in),
        used=fans_text(result.used),
        rounds_to_fill=to_fill,
        unfilled=fans_text(result.unfilled),
        settled_after=duration_text(result.settled_after_hours * 3600),
        rounds=[
            RoundShown(
                number=r.number,
                when=(
                    "at the draw"
                    if r.number == 0
                    else f"{duration_text(r.after_hours * 3600)} after it"
                ),
                invited=fans_text(r.invited),
                used=fans_text(r.used),
                lapsed=fans_text(r.lapsed),
            )
            for r in result.rounds[:ROUNDS_SHOWN]
        ],
        more_rounds=max(0, len(result.rounds) - ROUNDS_SHOWN),
    )


def draw_preview(form: DrawPreviewForm) -> DrawPreviewFigures:
    return draw_preview_figures(draw_forecast(form.inputs()))
