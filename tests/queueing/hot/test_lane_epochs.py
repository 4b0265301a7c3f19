"""Each lane of a line has its own epoch, judged on its own node: one lane lost (a master
that failed over alone) makes the line not whole, and the rebuild reloads every lane."""

import pytest
from django.test import Client

from queueing.hot import epoch, keys
from queueing.hot.line_index import IndexState, line_counts
from queueing.line import index_sync
from queueing.line.reads import event_layout
from tests.helpers import join, new_fan

pytestmark = pytest.mark.django_db


def positions(tickets: list[str]) -> list[int | None]:
    return [Client().get(f"/api/v1/tickets/{t}").json()["position"] for t in tickets]


def test_a_new_laned_on_sale_is_ready_in_every_lane(make_event) -> None:
    event = make_event(lanes=6)
    assert epoch.epoch_states([event.id], lanes={event.id: 6}) == {event.id: IndexState.READY}


def test_one_lane_lost_rebuilds_every_lane(make_event, redis_client) -> None:
    event = make_event(lanes=4, heartbeat_seconds=3600)
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(30)]
    before = positions(tickets)
    assert before == list(range(1, 31))
    # Lane 2's node lost its data (a replica without the last writes took over).
    for key in redis_client.scan_iter(match=f"{keys.prefix()}:{{{event.id}.2}}:*"):
        redis_client.delete(key)
    assert epoch.epoch_states([event.id], lanes={event.id: 4}) == {event.id: IndexState.MISSING}
    # Meanwhile the answers come from PostgreSQL, counting every lane.
    assert positions(tickets) == before
    assert index_sync.hot_index_maintain() == [event.id]
    assert epoch.epoch_states([event.id], lanes={event.id: 4}) == {event.id: IndexState.READY}
    counts = line_counts(event_layout(event.id, fresh=True))
    assert (counts.state, counts.waiting) == (IndexState.READY, 30)
    assert positions(tickets) == before
