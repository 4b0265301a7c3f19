"""'It's your turn' by e-mail: a fan may leave an address while in line; when they are let
in, one mail tells them, with a link that brings their place to whichever device opens it.

The address is kept only while it is needed: it is erased in the same compare-and-set that
claims the sending (so a mail is sent at most once, whichever worker runs first), and when the
ticket ends (queueing/records/transitions.py). A mail the SMTP server refuses is logged and
not sent again: the fan's page, notification and chime still call them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import connection, transaction
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from events.models import Event
from queueing.line.followups import turn_mail_soon
from queueing.line.place_links import place_link_create
from queueing.models import PlaceLink, QueueEntry
from queueing.rules.states import QUEUED, EntryStatus

logger = logging.getLogger(__name__)


def turn_mail_address_set(*, entry_id: int, address: str, language: str) -> bool:
    """Keep ``address`` (validated; "" takes it away) for a fan still in line. False when the
    ticket is no longer in line (nothing to tell them then)."""
    address = address.strip()
    if address:
        validate_email(address)  # raises ValidationError
    return (
        QueueEntry.objects.filter(pk=entry_id, status__in=QUEUED).update(
            notify_email=address, notify_language=language[:8] if address else ""
        )
        == 1
    )


def turn_mail_ask(entry_ids: Iterable[int]) -> None:
    """After an admission's commit: one query for the batch, and a task only when someone in
    it left an address."""
    ids = list(entry_ids)
    if not ids:
        return
    waiting_for_mail = list(
        QueueEntry.objects.filter(pk__in=ids, notified_at__isnull=True)
        .exclude(notify_email="")
        .values_list("id", flat=True)
    )
    if not waiting_for_mail:
        return
    try:
        turn_mail_soon(waiting_for_mail)
    except Exception:  # the broker is away: these fans are called by their pages alone
        logger.warning("could not ask for %d turn mails", len(waiting_for_mail), exc_info=True)


def turn_mail_send(*, entry_ids: Iterable[int], now: datetime) -> int:
    """Send each admitted fan who left an address one mail; returns how many were sent."""
    sent = 0
    for entry_id in entry_ids:
        claimed = _claim(entry_id, now)
        if claimed is None:
            continue
        address, language, link = claimed
        try:
            with translation.override(language or settings.LANGUAGE_CODE):
                send_mail(
                    subject=gettext("It's your turn: %(event)s") % {"event": link.event_name},
                    message=gettext(
                        "It's your turn in the waiting room of %(event)s.\n\n"
                        "Open this link to continue on this device (it works once, until "
                        "%(until)s UTC):\n%(url)s\n\n"
                        "If your waiting room page is still open, you can simply go back to it."
                    )
                    % {
                        "event": link.event_name,
                        "until": link.expires_at.strftime("%H:%M"),
                        "url": link.url,
                    },
                    from_email=None,
                    recipient_list=[address],
                )
        except Exception:  # any SMTP failure: logged; the address is gone, so never twice
            logger.warning("the turn mail of entry %s could not be sent", entry_id, exc_info=True)
            continue
        sent += 1
    return sent


@dataclass(frozen=True)
class _Link:
    event_name: str
    url: str
    expires_at: datetime


def _claim(entry_id: int, now: datetime) -> tuple[str, str, _Link] | None:
    """Take the address (erasing it) and make the mail's link, in one transaction; None when
    another run took it, the fan left no address, or the fan is no longer admitted."""
    table = QueueEntry._meta.db_table
    with transaction.atomic():
        with connection.cursor() as cursor:
            # The sub-select reads the address before the update erases it.
            cursor.execute(
                f"UPDATE {table} AS e SET notified_at = %s, notify_email = '' "
                f"FROM (SELECT id, notify_email FROM {table} WHERE id = %s "
                f"AND notified_at IS NULL AND notify_email <> '' AND status = %s FOR UPDATE) "
                f"AS before WHERE e.id = before.id "
                f"RETURNING before.notify_email, e.notify_language, e.event_id, e.pass_expires_at",
                [now, entry_id, EntryStatus.ADMITTED.value],
            )
            row = cursor.fetchone()
        if row is None:
            return None
        address, language, event_id, pass_expires_at = row
        event = Event.objects.only("slug", "name", "session_seconds").get(pk=event_id)
        expires_at = pass_expires_at or now + timedelta(seconds=event.session_seconds)
        token = place_link_create(
            entry_id=entry_id, purpose=PlaceLink.Purpose.EMAIL, now=now, expires_at=expires_at
        )
    url = settings.WR_PUBLIC_URL + reverse("place-link", args=[event.slug, token])
    return address, language, _Link(event_name=event.name, url=url, expires_at=expires_at)
