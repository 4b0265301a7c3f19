"""The shape of an event's line: its tiers in service order and its configured pace. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from queueing.rules.eta import Throughput


@dataclass(frozen=True)
class TierLayout:
    id: int
    priority: int
    share: int


@dataclass(frozen=True)
class EventLayout:
    event_id: int
    slug: str
    heartbeat_seconds: int
    # Admissions per second the event is configured for (None: no pace to go by).
    pace: float | None
    # In service order: (priority, id).
    tiers: tuple[TierLayout, ...]
    # What the settings alone say of the pace, until the admission runs have measured it.
    settings_pace: Throughput | None = None
    # Staff's word to the line ("" = none): polls carry it, read from this cached layout, so
    # a polling page learns of a new message within the cache's life and no query is made.
    message: str = ""
    # Staff paused the on-sale: fans are told no wait (nobody knows when staff will resume),
    # known to polls within the cache's life as the message is.
    paused: bool = False

    def tier_index(self, tier_id: int) -> int | None:
        for index, tier in enumerate(self.tiers):
            if tier.id == tier_id:
                return index
        return None
