"""The life of a ticket, declared once: statuses, allowed transitions, groupings."""

from __future__ import annotations

from django.db import models


class EntryStatus(models.TextChoices):
    PREQUEUE = "prequeue", "In the pre-queue"
    WAITING = "waiting", "Waiting"
    ADMITTED = "admitted", "Admitted"
    COMPLETED = "completed", "Completed"
    ABANDONED = "abandoned", "Abandoned"
    EXPIRED = "expired", "Expired"
    LEFT = "left", "Left"
    REVOKED = "revoked", "Revoked"


S = EntryStatus

TRANSITIONS: dict[EntryStatus, frozenset[EntryStatus]] = {
    S.PREQUEUE: frozenset({S.WAITING, S.LEFT, S.EXPIRED, S.REVOKED}),
    S.WAITING: frozenset({S.ADMITTED, S.LEFT, S.EXPIRED, S.REVOKED}),
    S.ADMITTED: frozenset({S.COMPLETED, S.ABANDONED, S.EXPIRED, S.REVOKED}),
    S.COMPLETED: frozenset(),
    S.ABANDONED: frozenset(),
    S.EXPIRED: frozenset(),
    S.LEFT: frozenset(),
    S.REVOKED: frozenset(),
}

# A fan holding a live ticket: at most one per identity and event.
LIVE: tuple[EntryStatus, ...] = (S.PREQUEUE, S.WAITING, S.ADMITTED)
# In line, not yet let in.
QUEUED: tuple[EntryStatus, ...] = (S.PREQUEUE, S.WAITING)
# Has been let in at some point.
WAS_ADMITTED: tuple[EntryStatus, ...] = (S.ADMITTED, S.COMPLETED, S.ABANDONED)
TERMINAL: tuple[EntryStatus, ...] = tuple(s for s, nxt in TRANSITIONS.items() if not nxt)
# The one way back from an end, outside TRANSITIONS on purpose (these stay terminal for every
# other move): a session that ended without completing (its pass expired, or it was
# abandoned) may go back to WAITING once, within the on-sale's re-entry window
# (queueing/rules/reentry.py). Only entries that were admitted: ``admitted_at`` tells.
REENTERABLE: tuple[EntryStatus, ...] = (S.EXPIRED, S.ABANDONED)
REENTRY_TO = S.WAITING


def can_transition(current: EntryStatus | str, new: EntryStatus | str) -> bool:
    return EntryStatus(new) in TRANSITIONS[EntryStatus(current)]


def sources_of(new: EntryStatus) -> tuple[EntryStatus, ...]:
    """Statuses from which ``new`` may be reached (for compare-and-set updates)."""
    return tuple(s for s, nxt in TRANSITIONS.items() if new in nxt)
