"""How the room puts things into words for fans: a wait as a range, never false precision;
and the words of "it's your turn" for the waiting page's script
(queueing/static/queueing/your_turn.js: the notification, the held page in a background
tab, the alert controls). Pure."""

from __future__ import annotations

import math

from django.utils.translation import gettext, ngettext

from queueing.rules.eta import Eta


def wait_range_text(eta: Eta | None) -> str:
    if eta is None:
        return gettext("We'll show an estimate as soon as the line starts moving.")
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


def js_strings() -> dict[str, str]:
    """The same wording for the page's script (which fills in the numbers itself)."""
    return {
        "unknown": gettext("We'll show an estimate as soon as the line starts moving."),
        "lessThanMinute": gettext("less than a minute"),
        # "about %(n)d minute(s)/hour(s)" are not here: they need the language's plural rule
        # for any n, so waiting.js asks the script catalog (djangojs domain) for them.
        "minutesRange": gettext("about %(low)d–%(high)d minutes"),
        "hoursRange": gettext("about %(low)d–%(high)d hours"),
        "next": gettext("You're next!"),
        "inLine": gettext("You're in line."),
        "admitted": gettext("It's your turn! Taking you to the shop…"),
        "offline": gettext("Live updates paused; we'll keep checking."),
        # The WebSocket's "replaced" message (queueing/web/consumers.py), translated.
        "replaced": gettext("This page was opened elsewhere."),
        "replacedHint": gettext("Reload this page to follow your place here instead."),
        "paused": gettext("The sale is paused for a moment. You keep your place."),
        "countdownDays": gettext("%(d)dd %(h)02d:%(m)02d:%(s)02d"),
        "countdown": gettext("%(h)02d:%(m)02d:%(s)02d"),
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
