"""A draw's outcome before it happens (the dashboard's preview): from the registrations staff
expect, how many get in on the first round of invitations, and how many waitlist rounds it
takes to fill the winners' places. Pure: no I/O, no clock.

The rules are those of ``line/draw.py`` and ``line/invitations.py``, for one tier (the
window's ``winners`` and ``waitlist`` are per tier): only confirmed registrations are drawn;
the first ``winners`` of them are invited at the draw, the next ``waitlist`` wait. An
invitation unused after ``invitation_hours`` lapses, and the next waitlisted registration is
invited in the same moment, for a fresh ``invitation_hours``: each round of lapses is one
waitlist round, ``invitation_hours`` after the one before.

A fluid of averages, as the line's preview (``rules/forecast.py``): a share ``use_share`` of
each round's invitations is used and the rest lapse, in expected fans (fractions included);
a place counts as filled once fewer than half a fan is expected still to lapse, so the rounds
end however small the share left.
"""

from __future__ import annotations

from dataclasses import dataclass

# Fewer expected fans than this still to come in a round is none: the rounds end.
HALF_A_FAN = 0.5
# A bound on the rounds whatever the inputs (at a use share of 1%, 10,000,000 winners' places
# are filled, or the waitlist dry, within about 1,700 rounds).
MAX_ROUNDS = 10_000


@dataclass(frozen=True)
class DrawForecastInputs:
    registrations: int  # expected in the tier
    confirmed_share: float  # of them who confirm their address (0 to 1); shop fans all do
    winners: int  # the window's, per tier
    waitlist: int  # the window's, per tier
    use_share: float  # of the invited who use their invitation before it lapses (0 to 1)
    invitation_hours: int


@dataclass(frozen=True)
class InvitationRound:
    number: int  # 0: the draw's own invitations; 1, 2, ...: waitlist rounds
    after_hours: int  # when the round's invitations go out, after the draw
    invited: float
    used: float
    lapsed: float


@dataclass(frozen=True)
class DrawForecast:
    confirmed: float  # in the draw's list
    places: float  # winners' places the draw fills: the winners, or everyone listed if fewer
    waitlisted: float
    lost: float
    first_round_in: float  # who use the draw's own invitations
    rounds: tuple[InvitationRound, ...]
    used: float  # over all rounds
    waitlist_invited: float
    # Waitlist rounds until every place is used (None: the waitlist runs dry first).
    rounds_to_fill: int | None
    unfilled: float  # places still empty once the rounds end
    settled_after_hours: int  # the last invitation's expiry, after the draw

    @property
    def filled(self) -> bool:
        return self.rounds_to_fill is not None


def _check(inputs: DrawForecastInputs) -> None:
    if min(inputs.registrations, inputs.winners, inputs.waitlist) < 0:
        raise ValueError("registrations, winners and waitlist cannot be negative")
    for share in (inputs.confirmed_share, inputs.use_share):
        if not 0 <= share <= 1:
            raise ValueError("a share is from 0 to 1")
    if inputs.invitation_hours < 1:
        raise ValueError("an invitation lasts an hour at least")


def draw_forecast(inputs: DrawForecastInputs) -> DrawForecast:
    """The draw's expected outcome, and the invitation rounds it sets off."""
    _check(inputs)
    confirmed = inputs.registrations * inputs.confirmed_share
    places = min(float(inputs.winners), confirmed)
    waitlisted = min(float(inputs.waitlist), confirmed - places)
    lost = confirmed - places - waitlisted
    rounds: list[InvitationRound] = []
    waitlist_left = waitlisted
    invited = places
    while invited >= HALF_A_FAN and len(rounds) < MAX_ROUNDS:
        used = invited * inputs.use_share
        lapsed = invited - used
        number = len(rounds)
        rounds.append(
            InvitationRound(
                number=number,
                after_hours=number * inputs.invitation_hours,
                invited=invited,
                used=used,
                lapsed=lapsed,
            )
        )
        # Each lapse invites the next waitlisted registration, while there is one.
        invited = min(lapsed, waitlist_left)
        if invited >= HALF_A_FAN:
            waitlist_left -= invited
    used_total = sum(r.used for r in rounds)
    unfilled = max(0.0, places - used_total)
    last_lapsed = rounds[-1].lapsed if rounds else 0.0
    filled = last_lapsed < HALF_A_FAN or unfilled < HALF_A_FAN
    return DrawForecast(
        confirmed=confirmed,
        places=places,
        waitlisted=waitlisted,
        lost=lost,
        first_round_in=rounds[0].used if rounds else 0.0,
        rounds=tuple(rounds),
        used=used_total,
        waitlist_invited=waitlisted - waitlist_left,
        rounds_to_fill=max(0, len(rounds) - 1) if filled else None,
        unfilled=0.0 if filled else unfilled,
        settled_after_hours=len(rounds) * inputs.invitation_hours,
    )
