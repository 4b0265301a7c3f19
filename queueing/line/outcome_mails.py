"""Outcome mails of a draw (docs/api.md, "Outcome mails"): each registrant by address is told
what the draw decided, once each, through the room's mail path (Django's ``send_mail``, as
the turn mail), and the address is erased once nothing more can be told.

What a registration is told follows its state: ``invited`` (a winner, or a waitlisted fan
invited as an invitation lapsed: the code and its expiry), ``waitlisted`` (their rank; the
address is kept, since an invitation may follow), ``lost``. ``Registration.mailed`` says what
was told last; a mail is claimed by a compare-and-set on it, so two runs never send the same
mail, and a told ``invited`` or ``lost`` erases the address in the same statement. A mail the
SMTP server does not take is released (the claim and the address put back) and the run
raises at its end, after trying the others, so the task's retry sends only what is missing.

Each mail speaks the language its fan registered in (``Registration.language``), its subject
and body alike. The language is kept when the address is erased: it is not personal data.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import translation
from django.utils.translation import gettext

from events.models import Event
from queueing.line.followups import registration_mails_soon
from queueing.models import Invitation, InvitationStatus, Registration, RegistrationWindow
from queueing.rules.registrations import invitation_code

logger = logging.getLogger(__name__)

INVITED, WAITLISTED, LOST = "invited", "waitlisted", "lost"
# Told these, a registrant will be told nothing more: the address goes.
FINAL = frozenset({INVITED, LOST})


class OutcomeMailsFailed(Exception):
    """Some outcome mails were not taken by the SMTP server: retried by the task."""


def registration_mails_ask(event_id: int) -> None:
    """After a commit that decided outcomes (the draw, a lapse): the mails asked for."""

    def ask() -> None:
        try:
            registration_mails_soon(event_id)
        except Exception:  # the broker is away: the next draw run's lapses ask again
            logger.warning("could not ask for the outcome mails of %s", event_id, exc_info=True)

    transaction.on_commit(ask)


def _to_tell(registration: Registration, invitation: Invitation | None) -> str:
    if invitation is not None and invitation.status == InvitationStatus.SENT:
        return INVITED
    if registration.outcome == "waitlisted":
        return WAITLISTED
    if registration.outcome == "lost":
        return LOST
    return ""


def registration_mails_send(*, event_id: int, now: datetime) -> int:
    """Tell every registrant by address of the on-sale what they have not been told yet;
    how many mails were sent. Raises OutcomeMailsFailed after the run if any was refused."""
    event = Event.objects.only("name", "slug").get(pk=event_id)
    window = RegistrationWindow.objects.get(event_id=event_id)
    candidates = (
        Registration.objects.filter(event_id=event_id, route="email")
        .exclude(email="")
        .exclude(outcome="")
        .select_related("invitation")
    )
    sent, failed = 0, 0
    for registration in candidates.iterator(chunk_size=500):
        invitation = getattr(registration, "invitation", None)
        tell = _to_tell(registration, invitation)
        if not tell or tell == registration.mailed:
            continue
        address = _claim(registration, tell)
        if address is None:
            continue
        try:
            _send(event, window, registration, invitation, tell, address)
        except Exception:  # any SMTP failure: released for the retry, the others go on
            logger.warning("outcome mail of %s not sent", registration.id, exc_info=True)
            Registration.objects.filter(id=registration.id, mailed=tell).update(
                mailed=registration.mailed, email=address
            )
            failed += 1
            continue
        sent += 1
    if failed:
        raise OutcomeMailsFailed(f"{failed} outcome mails of on-sale {event_id} not sent")
    return sent


def _claim(registration: Registration, tell: str) -> str | None:
    """Compare-and-set from what was told to ``tell``, erasing a final one's address; the
    address to send to, or None when another run claimed it."""
    claimed = Registration.objects.filter(
        id=registration.id, mailed=registration.mailed, email=registration.email
    )
    changes: dict[str, str] = {"mailed": tell}
    if tell in FINAL:
        changes["email"] = ""
    if not claimed.update(**changes):
        return None
    return registration.email


def _send(
    event: Event,
    window: RegistrationWindow,
    registration: Registration,
    invitation: Invitation | None,
    tell: str,
    address: str,
) -> None:
    with translation.override(registration.language or settings.LANGUAGE_CODE):
        subject, body = _words(event, window, registration, invitation, tell)
    send_mail(subject=subject, message=body, from_email=None, recipient_list=[address])


def _words(
    event: Event,
    window: RegistrationWindow,
    registration: Registration,
    invitation: Invitation | None,
    tell: str,
) -> tuple[str, str]:
    """The mail's subject and body, in the active language."""
    if tell == INVITED:
        assert invitation is not None
        subject = gettext("You can join the line: %(event)s") % {"event": event.name}
        body = gettext(
            "You were drawn for %(event)s.\n\n"
            "Your invitation code (it works once, until %(until)s UTC): %(code)s\n\n"
            "Join the line with it at %(url)s"
        ) % {
            "event": event.name,
            "until": invitation.expires_at.strftime("%Y-%m-%d %H:%M"),
            "code": invitation_code(window.identity_key, invitation.id),
            "url": f"{settings.WR_PUBLIC_URL}/e/{event.slug}/",
        }
    elif tell == WAITLISTED:
        subject = gettext("You are on the waitlist: %(event)s") % {"event": event.name}
        body = gettext(
            "You were not among the winners of the draw for %(event)s, but you are on its "
            "waitlist (rank %(rank)s in your tier). If an invitation lapses unused, the next "
            "fan on the waitlist is invited: we will mail you then."
        ) % {
            "event": event.name,
            # The place on the waitlist, as the fan's page says it: the first ``winners`` of
            # the tier's draw order won.
            "rank": (registration.draw_rank or 0) - window.winners,
        }
    else:
        subject = gettext("The draw's result: %(event)s") % {"event": event.name}
        body = gettext("You were not drawn for %(event)s this time. Thank you for registering.") % {
            "event": event.name
        }
    proof = gettext("Your registration's published hash: %(hash)s") % {
        "hash": registration.public_hash
    }
    return subject, f"{body}\n\n{proof}\n"
