"""Reads of many lines at once (a page of the staff catalogue): the same answers as one by
one, in a fixed number of queries however many lines there are."""

from __future__ import annotations

import pytest

from queueing import in_process
from queueing.hot import keys
from queueing.hot.line_index import IndexState
from queueing.line.reads import event_layouts, line_reads
from queueing.records.entry_reads import active_counts
from staff.services import TierSpec
from tests.helpers import fans_join

pytestmark = pytest.mark.django_db


def test_lines_without_a_hot_index_are_counted_together_in_postgresql(
    make_event, redis_client, django_assert_num_queries
) -> None:
    events = [
        make_event(
            slug=f"gig-{n}",
            tiers=[TierSpec("Fans", 100), TierSpec("VIP", 10, access_codes=[f"VIP{n}CODE"])],
        )
        for n in range(3)
    ]
    fans_join("gig-0", 2)
    fans_join("gig-1", 1, {"access_code": "VIP1CODE"})
    fans_join("gig-1", 3)
    in_process.clear_all()
    with django_assert_num_queries(2):  # the events, then their tiers
        layouts = event_layouts([e.id for e in events])
    hot = {e.id: line_reads.counts(layouts[e.id]) for e in events}
    assert {c.state for c in hot.values()} == {IndexState.READY}
    for event in events:
        redis_client.delete(keys.epoch(event.id))  # Redis lost the index
    with django_assert_num_queries(1):
        cold = line_reads.counts_many([layouts[e.id] for e in events])
    assert {c.state for c in cold.values()} == {IndexState.MISSING}
    assert {k: (c.prequeue, c.tiers) for k, c in cold.items()} == {
        k: (c.prequeue, c.tiers) for k, c in hot.items()
    }
    assert [cold[e.id].queue_length for e in events] == [2, 4, 0]
    with django_assert_num_queries(1):
        assert active_counts([e.id for e in events]) == {e.id: 0 for e in events}
