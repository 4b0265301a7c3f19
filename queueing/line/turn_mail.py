"""'It's your turn' by e-mail: a fan may leave an address while in line; when they are let
in, one mail tells them, with a link that brings their place to whichever device opens it.

The address is kept only while it is needed: it is erased in the same compare-and-set that
claims the sending (so a mail is sent at most once, whichever worker runs first), and when the
ticket ends (queueing/records/transitions.py). A mail the SMTP server refuses is logged and
not sent again: the fan's page, notification and chime still call them.

Nobody is to be mailed at will through the room. An address must be a mailbox under a public
domain name (no domain literal such as ``[127.0.0.1]``, no name without a dot such as
``localhost``). One address gets at most one mail per on-sale: the place that leaves it holds
it in Redis (by the SHA-256 of the lower-cased address, for ``WR_TURN_MAIL_WINDOW_SECONDS``),
and any other place asking for it is told so. That is decided when the address is left,
not when the mail is sent, so that the fan asking second hears it at once and the one who
asked first keeps their mail. Whoever leaves someone else's address first holds it only
while their place waits for the mail with it: a holder that ended or took its address back
is replaced. And one client address may leave ``WR_TURN_MAIL_PER_ADDRESS`` addresses per
on-sale and window, refusals included (so nobody learns many addresses' state either).
While Redis is away, neither is checked.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.core.validators import EmailValidator
from django.db import connection, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext

from events.models import Event
from queueing.hot import keys
from queueing.hot.rate_limits import claim_hold, claim_release, rate_limit_hit
from queueing.line.followups import turn_mail_soon
from queueing.line.place_links import place_link_create
from queueing.models import PlaceLink, QueueEntry
from queueing.rules.states import QUEUED, EntryStatus

logger = logging.getLogger(__name__)


class MailboxValidator(EmailValidator):
    """An address under a public domain name: Django's check without domain literals
    (``x@[127.0.0.1]``) and without its allowance for ``localhost``."""

    def __init__(self) -> None:
        super().__init__(allowlist=[])

    def validate_domain_part(self, domain_part: str) -> bool:
        return bool(self.domain_regex.match(domain_part))


validate_mailbox = MailboxValidator()


class TurnMailRefusal(enum.StrEnum):
    TAKEN = "taken"  # another place of the on-sale holds this address
    LIMITED = "limited"  # this client address left too many addresses for the on-sale


class TurnMailRefused(Exception):
    def __init__(self, reason: TurnMailRefusal) -> None:
        super().__init__(reason.value)
        self.reason = reason


def turn_mail_address_set(*, entry_id: int, address: str, language: str, client: str) -> bool:
    """Keep ``address`` (validated; "" takes it away) for a fan still in line, left from the
    client address ``client`` (its digest). False when the ticket is no longer in line
    (nothing to tell them then). Raises ValidationError for an address that is not a
    mailbox, TurnMailRefused when another place holds it or ``client`` left too many."""
    address = address.strip()
    if address:
        validate_mailbox(address)  # raises ValidationError
    found = (
        QueueEntry.objects.filter(pk=entry_id, status__in=QUEUED)
        .values_list("event_id", "notify_email")
        .first()
    )
    if found is None:
        return False
    event_id, kept = found
    if address and address.lower() != kept.lower():
        _spend_signup(event_id, client)
        _hold_recipient(event_id, entry_id, address)
    updated = QueueEntry.objects.filter(pk=entry_id, status__in=QUEUED).update(
        notify_email=address, notify_language=language[:8] if address else ""
    )
    if kept and kept.lower() != address.lower():
        claim_release(_recipient_key(event_id, kept), owner=str(entry_id))
    return updated == 1


def _recipient_key(event_id: int, address: str) -> str:
    return keys.turn_mail_recipient(event_id, hashlib.sha256(address.lower().encode()).hexdigest())


def _spend_signup(event_id: int, client: str) -> None:
    limit = settings.WR_TURN_MAIL_PER_ADDRESS
    if not limit:
        return
    wait = rate_limit_hit(
        keys.turn_mail_signups(event_id, client),
        now=time.time(),
        window=float(settings.WR_TURN_MAIL_WINDOW_SECONDS),
        limit=limit,
    )
    if wait is not None:
        raise TurnMailRefused(TurnMailRefusal.LIMITED)


def _hold_recipient(event_id: int, entry_id: int, address: str) -> None:
    """Hold the address for this place, or raise TAKEN: another place holds it and still
    waits for its mail with it, or was mailed at it."""
    key, owner, ttl = (
        _recipient_key(event_id, address),
        str(entry_id),
        settings.WR_TURN_MAIL_WINDOW_SECONDS,
    )
    holder = claim_hold(key, owner=owner, ttl_seconds=ttl)
    if holder is None or holder == owner:  # None: Redis away, not refused for it
        return
    if _holds_still(holder, address):
        raise TurnMailRefused(TurnMailRefusal.TAKEN)
    if claim_hold(key, owner=owner, ttl_seconds=ttl, stale_holder=holder) not in (None, owner):
        raise TurnMailRefused(TurnMailRefusal.TAKEN)  # a third place took it meanwhile


def _holds_still(holder: str, address: str) -> bool:
    """Does the place named ``holder`` still need the address: does it keep it, or was it
    mailed (its address erased by then)?"""
    if not holder.isdigit():
        return False
    return (
        QueueEntry.objects.filter(pk=int(holder))
        .filter(Q(notified_at__isnull=False) | Q(notify_email__iexact=address))
        .exists()
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
