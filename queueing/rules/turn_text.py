"""The words of "it's your turn" for the waiting page's script (queueing/static/queueing/
your_turn.js): the notification, the held page in a background tab, the alert controls."""

from __future__ import annotations

from django.utils.translation import gettext


def your_turn_strings() -> dict[str, str]:
    return {
        "yourTurnTitle": gettext("It's your turn!"),
        "yourTurnBody": gettext("The shop is ready for you. Come back to the waiting room tab."),
        "notifyOn": gettext("We'll notify you when it's your turn."),
        "notifyDenied": gettext(
            "Notifications are blocked in this browser; keep this tab where you can see it."
        ),
    }
