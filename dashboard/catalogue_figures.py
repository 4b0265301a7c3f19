"""The figures on each row of the staff catalogue: fans waiting, fans in the shop, pace.

Asked only for the rows on screen (a page), and each the cheapest way there is: waiting from
the hot index (PostgreSQL, in one grouped count, only for lines Redis cannot answer for), in
the shop in one grouped count, the pace as measured by the admission run (the in-process
cache of the status path), else as configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from events.models import Event
from queueing.line.reads import event_layouts, line_reads
from queueing.records.entry_reads import active_counts
from queueing.rules.layout import EventLayout


@dataclass(frozen=True)
class Pace:
    per_minute: float
    measured: bool  # by the admission run; else the on-sale's configured rate and capacity

    @property
    def text(self) -> str:
        # Whole fans from ten a minute up, else two significant figures at most: 6.7, 0.13.
        digits = 0 if self.per_minute >= 10 else 1 if self.per_minute >= 1 else 2
        text = f"{self.per_minute:.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text

    @property
    def source(self) -> str:
        return "measured" if self.measured else "configured"


@dataclass(frozen=True)
class RowFigures:
    waiting: int  # in the pre-queue or in line
    active: int  # admitted, in the shop
    capacity: int  # 0: no cap
    pace: Pace | None  # None: neither measured nor limited

    def as_json(self) -> dict[str, Any]:
        return {
            "waiting": self.waiting,
            "active": self.active,
            "capacity": self.capacity,
            "pace": self.pace.text if self.pace else None,
            "pace_source": self.pace.source if self.pace else None,
        }


def _pace(layout: EventLayout) -> Pace | None:
    throughput = line_reads.throughput(layout)
    if throughput is None:
        return None
    return Pace(per_minute=throughput.lam * 60, measured=throughput.measured)


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
            pace=_pace(layouts[event.pk]) if event.pk in layouts else None,
        )
        for event in events
    }
