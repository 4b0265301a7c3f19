"""The figures on each row of the staff catalogue: fans waiting, fans in the shop, pace.

Asked only for the rows on screen (a page), and each the cheapest way there is: waiting from
the hot index (PostgreSQL, in one grouped count, only for lines Redis cannot answer for), in
the shop in one grouped count, the pace as measured by the admission run (the in-process
cache of the status path), else the rate staff set.

Until the pace is measured, the row shows the rate as set (per minute, as staff set it),
"up to" it where the shop's capacity may hold fans back more. Not the settings' pace of the
wait estimates (queueing/rules/eta.py ``settings_throughput``): for a capacity-bound on-sale
that is the slowest the shop could be, every fan staying their whole session (5 places over
15 minutes: 0.33 a minute), and read as "configured" beside a rate of 30 a minute it looked
like a rate per second shown per minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.models import Event
from queueing.line.reads import event_layouts, line_reads
from queueing.records.entry_reads import active_counts
from queueing.rules.eta import capacity_may_bind
from queueing.rules.layout import EventLayout


@dataclass(frozen=True)
class Pace:
    per_minute: float
    measured: bool  # by the admission run; else the rate set on the on-sale
    at_most: bool = False  # the rate set, which the capacity may keep the pace under

    @property
    def text(self) -> str:
        # Whole fans from ten a minute up, else two significant figures at most: 6.7, 0.13.
        digits = 0 if self.per_minute >= 10 else 1 if self.per_minute >= 1 else 2
        text = f"{self.per_minute:.{digits}f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
        return f"up to {text}" if self.at_most else text

    @property
    def source(self) -> str:
        return "measured" if self.measured else "configured"


@dataclass(frozen=True)
class RowFigures:
    waiting: int  # in the pre-queue or in line
    active: int  # admitted, in the shop
    capacity: int  # 0: no cap
    pace: Pace | None  # None: not measured, and no pace set

    def as_json(self) -> dict[str, Any]:
        return {
            "waiting": self.waiting,
            "active": self.active,
            "capacity": self.capacity,
            "pace": self.pace.text if self.pace else None,
            "pace_source": self.pace.source if self.pace else None,
        }


def _pace(layout: EventLayout, event: Event) -> Pace | None:
    throughput = line_reads.throughput(layout)
    if throughput is not None and throughput.measured:
        return Pace(per_minute=throughput.lam * 60, measured=True)
    if not event.rate_per_minute:
        return None  # no pace set: the capacity alone holds fans back
    bound = capacity_may_bind(
        rate_per_minute=event.rate_per_minute,
        capacity=event.capacity,
        session_seconds=event.session_seconds,
    )
    return Pace(per_minute=event.rate_per_minute, measured=False, at_most=bound)


def rows_figures(events: Sequence[Event]) -> dict[int, RowFigures]:
    """Figures of these on-sales, by id: a fixed number of queries however many rows."""
    ids = [event.pk for event in events]
    layouts = {
        event_id: layout for event_id, layout in event_layouts(ids).items() if layout is not None
    }
    waiting = line_reads.counts_many(list(layouts.values()))
    active = active_counts(ids)
    return {
        event.pk: RowFigures(
            waiting=waiting[event.pk].queue_length if event.pk in waiting else 0,
            active=active[event.pk],
            capacity=event.capacity,
            pace=_pace(layouts[event.pk], event) if event.pk in layouts else None,
        )
        for event in events
    }
