"""What a join needs to know before it commits: whether the on-sale takes joins, the tier
each access code joins, the fans already in line (per identity and per client address), and
whether the line has started."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Count

from events.models import AccessCode, Event, EventMode, EventState, Tier
from events.validation import is_well_formed_access_code, normalise_access_code
from queueing.models import QueueEntry
from queueing.rules.errors import (
    EventClosed,
    EventMaintenance,
    EventNotOpen,
    InvalidAccessCode,
    QueueError,
)
from queueing.rules.states import LIVE, EntryStatus


def arrival_refusal(state: EventState, mode: str = EventMode.QUEUE) -> QueueError | None:
    """Why nobody new may join an on-sale in this state and mode (None: they may). Fans who
    already hold a live ticket get it back in maintenance: they keep their places."""
    if state == EventState.SCHEDULED:
        return EventNotOpen()
    if state == EventState.CLOSED:
        return EventClosed()
    if mode == EventMode.MAINTENANCE:
        return EventMaintenance()
    return None


def tiers_for_access_codes(
    event: Event, access_codes: Sequence[str | None]
) -> dict[str | None, Tier | QueueError]:
    """The tier each access code joins (the default tier without one), in two queries at
    most for the whole batch."""
    found: dict[str | None, Tier | QueueError] = {}
    without_code: list[str | None] = []
    with_code: dict[str, list[str]] = {}  # normalised code -> the spellings asked for
    for raw in set(access_codes):
        if raw is None or raw.strip() == "":
            found[raw] = InvalidAccessCode("This on-sale needs an access code.")
            without_code.append(raw)
            continue
        found[raw] = InvalidAccessCode()
        code = normalise_access_code(raw)
        if is_well_formed_access_code(code):
            with_code.setdefault(code, []).append(raw)
    if without_code:
        default = Tier.objects.filter(event=event, is_default=True).first()
        if default is not None:
            found.update((raw, default) for raw in without_code)
    if with_code:
        for access in AccessCode.objects.filter(event=event, code__in=with_code).select_related(
            "tier"
        ):
            found.update((raw, access.tier) for raw in with_code[access.code])
    return found


def live_entries(event_id: int, identities: set[str]) -> dict[str, QueueEntry]:
    """Each identity's live ticket for the event (one at most: a partial unique index)."""
    if not identities:
        return {}
    return {
        entry.identity: entry
        for entry in QueueEntry.objects.filter(
            event_id=event_id, identity__in=identities, status__in=LIVE
        )
    }


def live_per_address(event_id: int, addresses: set[str]) -> dict[str, int]:
    """How many live tickets of the event each client address (digest) holds."""
    if not addresses:
        return {}
    return dict(
        QueueEntry.objects.filter(event_id=event_id, address__in=addresses, status__in=LIVE)
        .values("address")
        .annotate(n=Count("id"))
        .values_list("address", "n")
    )


def arrival_status(event: Event, *, started: bool) -> EntryStatus:
    """On-sales with a start time gather a pre-queue until the line starts (the shuffle)."""
    if event.starts_at is not None and not started:
        return EntryStatus.PREQUEUE
    return EntryStatus.WAITING


def line_started(event_id: int) -> bool:
    """Read again under the chain lock, which the shuffle also takes."""
    return Event.objects.filter(pk=event_id, started_at__isnull=False).exists()
