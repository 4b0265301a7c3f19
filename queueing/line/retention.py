"""What the room stops keeping, once a run (the retention task, hourly by default).

- On-sales ended more than ``WR_RETENTION_DAYS`` ago are archived (``line/archives.py``), a
  few a run (``WR_RETENTION_PER_RUN``), oldest first; 0 days turns this off. An archive cut
  short after its on-sale was marked archived has its removal finished, whatever the setting.
- Place links leave a day past their expiry, used or not: until then a late click is told
  "expired" rather than "unknown".
- The addresses of a draw's waitlisted registrants never invited are erased once their
  on-sale has ended: no invitation, so no mail, can follow (``line/outcome_mails.py``).
- The address digest kept on an ended ticket that may still go back in line
  (``records/transitions.ending_assignments``) is erased once the on-sale's re-entry window
  has passed.

Staff login lockouts are the dashboard's to purge (``dashboard/login_throttle.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.db.models import Q

from events.models import Event, EventControl
from queueing.line.archives import (
    ArchiveRefused,
    archive_path,
    archive_removal_finish,
    onsale_archive,
)
from queueing.models import PlaceLink, QueueEntry, Registration
from queueing.rules.states import TERMINAL

logger = logging.getLogger(__name__)

PLACE_LINK_KEEP = timedelta(days=1)
_PURGE_BATCH = 5000


@dataclass(frozen=True)
class RetentionOutcome:
    archived: list[str] = field(default_factory=list)  # slugs
    refused: dict[str, str] = field(default_factory=dict)  # slug -> why
    place_links: int = 0
    address_digests: int = 0
    registration_addresses: int = 0


def archives_due(*, now: datetime, days: int) -> list[Event]:
    """On-sales not archived that ended (closed, or past their end) more than ``days`` ago,
    the longest ended first."""
    cutoff = now - timedelta(days=days)
    ended = Q(control=EventControl.CLOSED, closed_at__lt=cutoff) | Q(ends_at__lt=cutoff)
    return list(Event.objects.filter(ended, archived_at__isnull=True).order_by("closed_at", "id"))


def retention_run(*, now: datetime) -> RetentionOutcome:
    archived: list[str] = []
    refused: dict[str, str] = {}
    # An archive cut short after the on-sale was marked: its removal finished (its chain
    # head is the last thing removed, so it marks the unfinished).
    for event_id in Event.objects.filter(
        archived_at__isnull=False, audit_head__isnull=False
    ).values_list("id", flat=True):
        try:
            archive_removal_finish(event_id=event_id)
        except ArchiveRefused as refusal:  # another run holds it: that run finishes it
            logger.info("retention: on-sale %s not finished here: %s", event_id, refusal)
    if settings.WR_RETENTION_DAYS:
        directory = Path(settings.WR_ARCHIVE_DIR)
        for event in archives_due(now=now, days=settings.WR_RETENTION_DAYS):
            if len(archived) >= settings.WR_RETENTION_PER_RUN:
                break
            out = archive_path(event, now=now, directory=directory)
            try:
                onsale_archive(event_id=event.id, now=now, out=out)
            except ArchiveRefused as refusal:
                # Fans still in it (a session not yet over), or a trail that does not verify:
                # left as it is, said each run until someone looks.
                logger.warning("retention: %s not archived: %s", event.slug, refusal)
                refused[event.slug] = str(refusal)
                continue
            archived.append(event.slug)
    return RetentionOutcome(
        archived=archived,
        refused=refused,
        place_links=place_links_purge(now=now),
        address_digests=address_digests_erase(now=now),
        registration_addresses=registration_addresses_erase(now=now),
    )


def place_links_purge(*, now: datetime) -> int:
    """Remove place links a day past their expiry (used or not), a batch at a time."""
    table = PlaceLink._meta.db_table
    sql = f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE expires_at < %s LIMIT %s)"
    return _in_batches(sql, [now - PLACE_LINK_KEEP, _PURGE_BATCH])


def address_digests_erase(*, now: datetime) -> int:
    """Erase the address digests still kept on ended tickets once no re-entry can use them:
    the ticket ended longer ago than its on-sale's ``reentry_seconds``."""
    table = QueueEntry._meta.db_table
    # The statuses written out, as the partial index ``entry_ended_address`` names them, so
    # that the planner reads that (small) index rather than the table.
    ended = ", ".join(f"'{status.value}'" for status in TERMINAL)
    sql = (
        f"UPDATE {table} SET address = NULL WHERE id IN (SELECT entry.id FROM {table} AS entry"
        f" JOIN {Event._meta.db_table} AS event ON event.id = entry.event_id"
        f" WHERE entry.status IN ({ended}) AND entry.address IS NOT NULL"
        " AND entry.ended_at < %s - make_interval(secs => event.reentry_seconds) LIMIT %s)"
    )
    return _in_batches(sql, [now, _PURGE_BATCH])


def registration_addresses_erase(*, now: datetime) -> int:
    """Erase the addresses still kept on registrations of on-sales that ended (closed, or
    past their end): the waitlisted never invited, whom nothing more will be told."""
    ended = Q(event__control=EventControl.CLOSED) | Q(event__ends_at__lt=now)
    kept = Registration.objects.filter(ended).exclude(email="").exclude(outcome="")
    return kept.update(email="")


def _in_batches(sql: str, params: list[object]) -> int:
    """Run ``sql`` (its last parameter the batch) until a batch falls short; each commits
    on its own outside a transaction."""
    done = 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(sql, params)
            done += cursor.rowcount
            if cursor.rowcount < params[-1]:  # type: ignore[operator]
                return done
