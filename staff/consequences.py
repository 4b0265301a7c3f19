"""What a control would do to the fans, in numbers, for its confirmation: how many are in
line (and so would be sent home by a close) and how many are in the shop. Counted in
PostgreSQL, which is what the close itself revokes from (queueing/line/schedule.py), so the
number staff confirm is the number that goes home, give or take who joins in between."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from queueing.records.entry_reads import active_counts, waiting_counts


@dataclass(frozen=True)
class FansNow:
    in_line: int  # in the pre-queue or waiting: a close sends them home
    in_shop: int  # admitted: they keep their pass until their session ends


def fans_now(event_ids: Collection[int]) -> dict[int, FansNow]:
    """Per on-sale, who is in line and who is in the shop: two grouped counts however many."""
    waiting = waiting_counts(event_ids)
    active = active_counts(event_ids)
    counts = {}
    for event_id in event_ids:
        prequeue, by_tier = waiting.get(event_id, (0, {}))
        counts[event_id] = FansNow(
            in_line=prequeue + sum(by_tier.values()), in_shop=active.get(event_id, 0)
        )
    return counts
