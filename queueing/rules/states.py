"""The life of a ticket, declared once: statuses, allowed transitions, groupings; and the one
way back from an end, re-entry. Pure: no I/O.

Re-entry: who may go back in line after a shop session that ended without completing, until
when, and where in the line they stand then (docs/api.md, "Re-entry"). A fan whose pass
expired, or whose session was abandoned, may come back once, within the on-sale's
``reentry_seconds`` counted from the end of that session, to the front of their tier.
Everyone else is refused with a sentence that says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import models
from django.utils.translation import gettext_noop


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
# (below). Only entries that were admitted: ``admitted_at`` tells.
REENTERABLE: tuple[EntryStatus, ...] = (S.EXPIRED, S.ABANDONED)
REENTRY_TO = S.WAITING


def can_transition(current: EntryStatus | str, new: EntryStatus | str) -> bool:
    return EntryStatus(new) in TRANSITIONS[EntryStatus(current)]


def sources_of(new: EntryStatus) -> tuple[EntryStatus, ...]:
    """Statuses from which ``new`` may be reached (for compare-and-set updates)."""
    return tuple(s for s, nxt in TRANSITIONS.items() if new in nxt)


# ----------------------------------------------------------------------- re-entry


@dataclass(frozen=True)
class ReentryFacts:
    """What the rule needs to know of an entry and its on-sale."""

    status: EntryStatus
    was_admitted: bool  # ``admitted_at`` is set: the fan had a session in the shop
    ended_at: datetime | None
    reentered_at: datetime | None
    reentry_seconds: int  # the on-sale's window; 0 = re-entry is off
    event_closed: bool
    event_in_maintenance: bool


def reentry_refusal(facts: ReentryFacts, *, now: datetime) -> str | None:
    """Why this entry may not go back in line now (a sentence for the fan, marked for
    translation: the page says it in the fan's language); None: it may."""
    if facts.status == EntryStatus.COMPLETED:
        return gettext_noop("This visit to the shop was completed; there is nothing to go back to.")
    if facts.status in LIVE:
        return gettext_noop("This ticket is still in line or in the shop.")
    if facts.status not in REENTERABLE or not facts.was_admitted:
        return gettext_noop(
            "Only a fan whose time in the shop ran out, or whose visit the shop ended, "
            "can go back in line; join the line again instead."
        )
    if facts.reentered_at is not None:
        return gettext_noop("This ticket has already gone back in line once.")
    if facts.reentry_seconds <= 0:
        return gettext_noop(
            "This on-sale does not let fans go back in line; join the line again instead."
        )
    if facts.event_closed:
        return gettext_noop("This on-sale has ended.")
    if facts.event_in_maintenance:
        return gettext_noop("The waiting room is closed for maintenance; please try again later.")
    until = _window_end(facts)
    if until is None or now >= until:
        return gettext_noop("The time to go back in line has passed; join the line again instead.")
    return None


def reentry_until(facts: ReentryFacts, *, now: datetime) -> datetime | None:
    """Until when the fan may go back in line (exclusive); None when they may not now."""
    if reentry_refusal(facts, now=now) is not None:
        return None
    return _window_end(facts)


def _window_end(facts: ReentryFacts) -> datetime | None:
    if facts.ended_at is None:
        return None
    return facts.ended_at + timedelta(seconds=facts.reentry_seconds)


def front_order_key(own_key: int, smallest_waiting: int | None) -> int:
    """The order key that puts a returning fan at the front of their tier: their own when it
    is already below every waiting key of the tier (they are simply back where they were),
    else one below the smallest (only the tier's order counts, so a key below another
    fan's in another tier or of an entry no longer waiting is harmless)."""
    if smallest_waiting is None or own_key < smallest_waiting:
        return own_key
    return smallest_waiting - 1
