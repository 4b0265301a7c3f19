"""Moving a fan's place to another browser ("Continue on your phone", the link in the "it's
your turn" e-mail): one place, whichever browser shows it.

The page cookie carries the entry's ``holder_key``; a claim gives the place a new key and the
claiming browser the cookie with it, so the old browser's page says the place moved. The
claiming browser also gets the place's new ticket, which names that key
(rules/ticket_codec.py): the ticket the place had before is spent everywhere (status, leave,
re-entry, the socket; the hot index is told so after the commit). No new entry is ever made:
the entry, its order key and its status stay as they are.

A place has one "Continue on your phone" link at a time: a new one revokes the one before
(it answers as expired), and a place may ask for ``WR_PLACE_LINKS_PER_PLACE`` of them per
``WR_PLACE_LINK_SECONDS`` (each is a row and a QR code drawn).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from queueing.hot import keys
from queueing.hot.channels import notify_moved
from queueing.hot.rate_limits import rate_limit_hit
from queueing.line.index_sync import index_holder_moved
from queueing.models import PlaceLink, QueueEntry
from queueing.rules.errors import RateLimited
from queueing.rules.place_links import (
    LinkRefusal,
    PlaceLinkRefused,
    holder_key_new,
    link_token_digest,
    link_token_new,
)
from queueing.rules.states import LIVE, QUEUED
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


def device_link_new(*, entry_id: int, event_id: int, now: datetime) -> tuple[str, datetime]:
    """The place's "Continue on your phone" link (the token, and when it expires); the link
    made before it no longer works. RateLimited past ``WR_PLACE_LINKS_PER_PLACE``."""
    limit = settings.WR_PLACE_LINKS_PER_PLACE
    window = settings.WR_PLACE_LINK_SECONDS
    if limit:
        wait = rate_limit_hit(
            keys.place_links(event_id, entry_id),
            now=now.timestamp(),
            window=float(window),
            limit=limit,
        )
        if wait is not None:
            raise RateLimited(retry_after=max(1, math.ceil(wait)))
    expires_at = now + timedelta(seconds=window)
    with transaction.atomic():
        # Two asking at once (a double click) take turns, so one link is left live.
        QueueEntry.objects.select_for_update().filter(pk=entry_id).values_list("id").first()
        PlaceLink.objects.filter(
            entry_id=entry_id,
            purpose=PlaceLink.Purpose.DEVICE,
            used_at__isnull=True,
            expires_at__gt=now,
        ).update(expires_at=now)
        token = place_link_create(
            entry_id=entry_id, purpose=PlaceLink.Purpose.DEVICE, now=now, expires_at=expires_at
        )
    return token, expires_at


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
        entry = QueueEntry.objects.only("id", "event_id", "tier_id", "status", "lane").get(
            pk=link.entry_id
        )
        in_line = entry.status in QUEUED  # else the hot index does not list it
        transaction.on_commit(
            lambda: _tell_moved(entry.event_id, entry.id, holder, in_line, lane=entry.lane)
        )
    # The place's new ticket names its holder: the one it had before is spent.
    ref = TicketRef(
        entry_id=entry.id,
        event_id=entry.event_id,
        tier_id=entry.tier_id,
        holder=holder,
        lane=entry.lane,
    )
    return PlaceClaimed(ticket=ticket_issue(ref), holder_key=holder)


def _tell_moved(event_id: int, entry_id: int, holder: str, in_line: bool, *, lane: int) -> None:
    """After the commit: the hot index, for a place in line (it then sends the old ticket's
    polls to the entry's row), and the old browser's open pages (closed with 4410)."""
    if in_line:
        index_holder_moved(event_id, entry_id, holder, lane=lane)
    notify_moved(entry_id)


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
