"""Moving a fan's place to another browser ("Continue on your phone", the link in the "it's
your turn" e-mail): one place, whichever browser shows it.

The page cookie carries the entry's ``holder_key``; a claim gives the place a new key and the
claiming browser the cookie with it, so the old browser's page says the place moved. No new
entry is ever made: the ticket, its order key and its status stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from queueing.hot.channels import notify_moved
from queueing.models import PlaceLink, QueueEntry
from queueing.rules.place_links import (
    LinkRefusal,
    PlaceLinkRefused,
    holder_key_new,
    link_token_digest,
    link_token_new,
)
from queueing.rules.states import LIVE
from queueing.rules.ticket_codec import TicketRef, ticket_issue


@dataclass(frozen=True)
class PlaceClaimed:
    ticket: str
    holder_key: str


def place_link_create(
    *, entry_id: int, purpose: PlaceLink.Purpose, now: datetime, expires_at: datetime
) -> str:
    """A new link to the entry's place; the token is returned once and never kept."""
    token = link_token_new()
    PlaceLink.objects.create(
        token_sha256=link_token_digest(token),
        entry_id=entry_id,
        purpose=purpose,
        created_at=now,
        expires_at=expires_at,
    )
    return token


def place_link_check(*, token: str, event_id: int, now: datetime) -> None:
    """Would this link still move a place (for the confirmation page)? Raises if not."""
    link = _link(token, event_id)
    _refuse_if_spent(link, now)


def place_link_claim(*, token: str, event_id: int, now: datetime) -> PlaceClaimed:
    """Move the place to the browser that claims the link: the link is spent and the place
    gets a new holder key in one transaction, each by compare-and-set, so two browsers
    claiming at once cannot both win. The old browser's open pages are told after commit."""
    link = _link(token, event_id)
    holder = holder_key_new()
    with transaction.atomic():
        spent = PlaceLink.objects.filter(
            pk=link.pk, used_at__isnull=True, expires_at__gt=now
        ).update(used_at=now)
        if spent != 1:
            link.refresh_from_db()
            _refuse_if_spent(link, now)
            raise PlaceLinkRefused(LinkRefusal.USED)  # spent meanwhile by the other claim
        moved = QueueEntry.objects.filter(pk=link.entry_id, status__in=LIVE).update(
            holder_key=holder
        )
        if moved != 1:
            raise PlaceLinkRefused(LinkRefusal.ENDED)  # rolls the spending back
        entry = QueueEntry.objects.only("id", "event_id", "tier_id").get(pk=link.entry_id)
        transaction.on_commit(lambda: notify_moved(entry.id))
    ref = TicketRef(entry_id=entry.id, event_id=entry.event_id, tier_id=entry.tier_id)
    return PlaceClaimed(ticket=ticket_issue(ref), holder_key=holder)


def _link(token: str, event_id: int) -> PlaceLink:
    link = (
        PlaceLink.objects.filter(token_sha256=link_token_digest(token), entry__event_id=event_id)
        .select_related("entry")
        .first()
    )
    if link is None:
        raise PlaceLinkRefused(LinkRefusal.UNKNOWN)
    return link


def _refuse_if_spent(link: PlaceLink, now: datetime) -> None:
    if link.used_at is not None:
        raise PlaceLinkRefused(LinkRefusal.USED)
    if link.expires_at <= now:
        raise PlaceLinkRefused(LinkRefusal.EXPIRED)
    if link.entry.status not in LIVE:
        raise PlaceLinkRefused(LinkRefusal.ENDED)
