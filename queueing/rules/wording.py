"""How the room puts things into words for fans: a wait as a range, never false precision, or
the sentence that is true while there is none; the fan's place in one line; and the words of
"it's your turn" for the waiting page's script (queueing/static/queueing/your_turn.js: the
notification, the held page in a background tab, the alert controls). Pure.

The waiting page says the same thing on its first paint (the server, from here) and with every
live update (waiting.js, ``statusKind`` and ``waitKind``): each situation has a kind chosen by
one rule, mirrored in the script and held to it by tests/queueing/web/test_wait_words_js.py,
and each kind one sentence, handed to the script by ``js_strings``."""

from __future__ import annotations

import math
from enum import StrEnum

from django.contrib.humanize.templatetags.humanize import intcomma
from django.utils.translation import gettext, ngettext

from queueing.rules.eta import Eta

# Event states and modes as they reach the rules (events/models.py, which rules do not import).
_PAUSED, _CLOSED, _MAINTENANCE = "paused", "closed", "maintenance"
_PREQUEUE = "prequeue"


class WaitKind(StrEnum):
    """What the "Expected wait" figure can truthfully say."""

    PREQUEUE = "prequeue"  # places are drawn at the start: no place, no wait yet
    MAINTENANCE = "maintenance"  # nobody goes in until staff end maintenance
    CLOSED = "closed"  # the sale is over
    PAUSED = "paused"  # nobody goes in until staff resume
    ESTIMATE = "estimate"  # a range from the measured pace
    BOUNDED = "bounded"  # still measuring, but the settings bound the wait from above
    MEASURING = "measuring"  # still measuring, and nothing bounds it


def wait_kind(
    *, status: str, state: str, mode: str, eta: Eta | None, bound_seconds: float | None
) -> WaitKind:
    """The one rule (waiting.js ``waitKind`` is its mirror): what stops the line comes before
    any figure, and a figure before a bound."""
    if status == _PREQUEUE:
        return WaitKind.PREQUEUE
    if mode == _MAINTENANCE:
        return WaitKind.MAINTENANCE
    if state == _CLOSED:
        return WaitKind.CLOSED
    if state == _PAUSED:
        return WaitKind.PAUSED
    if eta is not None:
        return WaitKind.ESTIMATE
    if bound_seconds is not None:
        return WaitKind.BOUNDED
    return WaitKind.MEASURING


def _wait_sentences() -> dict[str, str]:
    """The sentences of the kinds without figures, in the active language."""
    return {
        WaitKind.PREQUEUE: gettext("Known once the sale starts and places are drawn."),
        WaitKind.MAINTENANCE: gettext("On hold during maintenance."),
        WaitKind.CLOSED: gettext("None: the sale has ended."),
        WaitKind.PAUSED: gettext("On hold while the sale is paused."),
        WaitKind.MEASURING: gettext("Still measuring how fast the line moves."),
    }


def wait_text(kind: WaitKind, *, eta: Eta | None = None, bound_seconds: float | None = None) -> str:
    if kind == WaitKind.ESTIMATE and eta is not None:
        return wait_range_text(eta)
    if kind == WaitKind.BOUNDED and bound_seconds is not None:
        return wait_bound_text(bound_seconds)
    return _wait_sentences()[kind]


def wait_bound_text(bound_seconds: float) -> str:
    """A bound, rounded up: "at most" must hold."""
    minutes = max(1, math.ceil(bound_seconds / 60))
    if minutes >= 120:
        hours = math.ceil(bound_seconds / 3600)
        return ngettext(
            "At most %(n)d hour (still measuring how fast the line moves).",
            "At most %(n)d hours (still measuring how fast the line moves).",
            hours,
        ) % {"n": hours}
    return ngettext(
        "At most %(n)d minute (still measuring how fast the line moves).",
        "At most %(n)d minutes (still measuring how fast the line moves).",
        minutes,
    ) % {"n": minutes}


def wait_range_text(eta: Eta) -> str:
    low_minutes = math.floor(eta.p10 / 60)
    high_minutes = math.ceil(eta.p90 / 60)
    if high_minutes <= 1:
        return gettext("less than a minute")
    if high_minutes >= 120:
        low_hours = max(1, round(eta.p10 / 3600))
        high_hours = max(low_hours, round(eta.p90 / 3600))
        if low_hours == high_hours:
            return ngettext("about %(n)d hour", "about %(n)d hours", low_hours) % {"n": low_hours}
        return gettext("about %(low)d–%(high)d hours") % {"low": low_hours, "high": high_hours}
    low_minutes = max(1, low_minutes)
    if low_minutes >= high_minutes:
        return ngettext("about %(n)d minute", "about %(n)d minutes", high_minutes) % {
            "n": high_minutes
        }
    return gettext("about %(low)d–%(high)d minutes") % {"low": low_minutes, "high": high_minutes}


class StatusKind(StrEnum):
    """The page's first line: where the fan stands."""

    PREQUEUE = "prequeue"
    PREQUEUE_MAINTENANCE = "prequeueMaintenance"
    MAINTENANCE = "maintenance"
    PAUSED = "paused"
    NEXT = "next"
    IN_LINE = "inLine"


def status_kind(*, status: str, state: str, mode: str, position: int | None) -> StatusKind:
    """The one rule (waiting.js ``statusKind`` is its mirror) for a fan in line."""
    if status == _PREQUEUE:
        return StatusKind.PREQUEUE_MAINTENANCE if mode == _MAINTENANCE else StatusKind.PREQUEUE
    if mode == _MAINTENANCE:
        return StatusKind.MAINTENANCE
    if state == _PAUSED:
        return StatusKind.PAUSED
    return StatusKind.NEXT if position == 1 else StatusKind.IN_LINE


def _status_sentences() -> dict[str, str]:
    # Maintenance in one sentence that says all three things ("paused", the place kept, in
    # when it reopens): never "closed" beside "you're in line", which read as "it's over".
    return {
        StatusKind.PREQUEUE: gettext("You're in the pre-queue."),
        StatusKind.PREQUEUE_MAINTENANCE: gettext(
            "The on-sale is paused for maintenance. You keep your place in the pre-queue."
        ),
        StatusKind.MAINTENANCE: gettext(
            "The shop is paused for maintenance. You keep your place and go in when it reopens."
        ),
        StatusKind.PAUSED: gettext("The sale is paused for a moment. You keep your place."),
        StatusKind.NEXT: gettext("You're next!"),
        StatusKind.IN_LINE: gettext("You're in line."),
    }


def status_text(kind: StatusKind) -> str:
    return _status_sentences()[kind]


def others_waiting_text(queue_length: int) -> str:
    """The pre-queue's company: everyone in line but the fan themself."""
    others = max(0, queue_length - 1)
    if not others:
        return gettext("Nobody else is waiting yet.")
    return ngettext(
        "%(n)s other person is waiting with you.",
        "%(n)s other people are waiting with you.",
        others,
    ) % {"n": intcomma(others)}


def js_strings() -> dict[str, str]:
    """The same wording for the page's script (which fills in the numbers itself)."""
    return {
        **{f"status:{kind}": text for kind, text in _status_sentences().items()},
        **{f"wait:{kind}": text for kind, text in _wait_sentences().items()},
        "nobodyElse": gettext("Nobody else is waiting yet."),
        "lessThanMinute": gettext("less than a minute"),
        # "about %(n)d minute(s)/hour(s)", "at most …" and "%(n)s other people …" are not here:
        # they need the language's plural rule for any n, so waiting.js asks the script
        # catalog (djangojs domain) for them.
        "minutesRange": gettext("about %(low)d–%(high)d minutes"),
        "hoursRange": gettext("about %(low)d–%(high)d hours"),
        "admitted": gettext("It's your turn! Taking you to the shop…"),
        # The wait figure once the fan is let in (the server's page has gone to the shop by then).
        "waitNow": gettext("None: it's your turn."),
        "offline": gettext("Live updates paused; we'll keep checking."),
        # The WebSocket's "replaced" message (queueing/web/consumers.py), translated.
        "replaced": gettext("This page was opened elsewhere."),
        "replacedHint": gettext("Reload this page to follow your place here instead."),
        "countdownDays": gettext("%(d)dd %(h)02d:%(m)02d:%(s)02d"),
        "countdown": gettext("%(h)02d:%(m)02d:%(s)02d"),
        # The page's first line once the sale sold out (templates/queueing/waiting.html).
        "soldOut": gettext("Sold out"),
    }


def your_turn_strings() -> dict[str, str]:
    return {
        "yourTurnTitle": gettext("It's your turn!"),
        "yourTurnBody": gettext("The shop is ready for you. Come back to the waiting room tab."),
        "notifyOn": gettext("We'll notify you when it's your turn."),
        "notifyDenied": gettext(
            "Notifications are blocked in this browser; keep this tab where you can see it."
        ),
    }
