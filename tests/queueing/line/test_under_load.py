"""The line under concurrency and with Redis losing its data, against the real processes."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django_redis import get_redis_connection

from queueing.hot import epoch
from queueing.hot.line_index import IndexState
from queueing.models import QueueEntry
from queueing.rules.ticket_codec import ticket_read
from tests.helpers import admission_halted
from tests.http import request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def join_many(base: str, slug: str, count: int, headers: dict[str, str] | None = None):
    with ThreadPoolExecutor(max_workers=64) as pool:
        return list(
            pool.map(
                lambda _: request("POST", f"{base}/api/v1/events/{slug}/join", {}, headers),
                range(count),
            )
        )


def positions(base: str, tickets: list[str]) -> list[int | None]:
    with ThreadPoolExecutor(max_workers=16) as pool:
        replies = pool.map(lambda t: request("GET", f"{base}/api/v1/tickets/{t}"), tickets)
        return [reply.body["position"] for reply in replies]


def test_300_concurrent_joins_get_distinct_tickets_and_positions_1_to_300(make_event) -> None:
    event = make_event()
    with running_stack() as stack:
        base = stack.web(workers=2)
        replies = join_many(base, event.slug, 300)
        assert [r.status for r in replies] == [201] * 300
        tickets = [r.body["ticket"] for r in replies]
        assert len(set(tickets)) == 300
        # Join-time answers are in range; once all joins are in, positions are exactly 1..300
        # and follow the order keys PostgreSQL assigned.
        assert all(1 <= r.body["position"] <= 300 for r in replies)
        now_positions = positions(base, tickets)
        assert sorted(now_positions) == list(range(1, 301))
        by_order_key = dict(QueueEntry.objects.values_list("id", "order_key"))
        entry_ids = [ticket_read(t).entry_id for t in tickets]
        ranked = sorted(entry_ids, key=by_order_key.__getitem__)
        assert [now_positions[entry_ids.index(e)] for e in ranked] == list(range(1, 301))


def test_concurrent_joins_with_one_identity_create_exactly_one_entry(make_event) -> None:
    event = make_event()
    with running_stack() as stack:
        base = stack.web(workers=2)
        replies = join_many(base, event.slug, 60, {"Idempotency-Key": "same-fan"})
        assert sorted(r.status for r in replies) == [200] * 59 + [201]
        assert len({r.body["ticket"] for r in replies}) == 1
        assert QueueEntry.objects.count() == 1


# Every key of the room under test, deleted in one step as a flush would (KEYS is fine on a test
# database): the tests of another run, or of another pytest worker, share the Redis database.
LOSE_EVERYTHING = """
local keys = redis.call('KEYS', ARGV[1])
for i = 1, #keys, 1000 do
    redis.call('DEL', unpack(keys, i, math.min(i + 999, #keys)))
end
return #keys
"""


def test_after_redis_loses_everything_positions_come_back_within_10_seconds(
    make_event, hot_prefix
) -> None:
    event = make_event()
    with running_stack() as stack:
        base = stack.web(workers=2)
        stack.worker()
        stack.beat()
        tickets = [r.body["ticket"] for r in join_many(base, event.slug, 120)]
        for ticket in tickets[10:20]:
            assert request("DELETE", f"{base}/api/v1/tickets/{ticket}").status == 204
        # Held, so that the line moves only as Redis makes it: the on-sale is open, and its
        # pace would let fans in (and everyone behind move up) while positions are read.
        admission_halted(event)
        in_line = set(QueueEntry.objects.filter(status="waiting").values_list("id", flat=True))
        waiting = [t for t in tickets[:10] + tickets[20:] if ticket_read(t).entry_id in in_line]
        before = positions(base, waiting)
        assert sorted(before) == list(range(1, len(waiting) + 1))

        assert get_redis_connection("default").eval(LOSE_EVERYTHING, 0, f"{hot_prefix}:*")
        lost_at = time.monotonic()
        # Degraded but honest meanwhile: positions come from PostgreSQL.
        assert positions(base, waiting[:5]) == before[:5]
        wait_until(
            lambda: epoch.epoch_states([event.id])[event.id] is IndexState.READY,
            timeout=10,
            what="the hot index to be rebuilt",
        )
        assert time.monotonic() - lost_at <= 10
        assert positions(base, waiting) == before
        newcomer = request("POST", f"{base}/api/v1/events/{event.slug}/join", {})
        assert newcomer.status == 201
        assert newcomer.body["position"] == len(waiting) + 1
