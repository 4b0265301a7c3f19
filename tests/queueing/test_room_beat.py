"""The room's beat: work where there is work, one tick per on-sale, none piling up, and the
pace kept whatever the timing of the ticks."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from events.models import EventControl
from queueing.beat import event_beat, event_tick, room_dispatch
from queueing.hot import epoch, keys, tick_claims
from queueing.line.activity import events_due_to_start, events_with_fans, events_with_work
from queueing.line.admission import admission_run
from queueing.line.index_sync import hot_index_maintain
from queueing.models import QueueEntry
from staff.services import event_close
from tests.events.bulk import bulk_started
from tests.helpers import fans_join, statuses

pytestmark = pytest.mark.django_db


def test_only_on_sales_with_fans_or_a_start_due_have_work(make_event) -> None:
    now = timezone.now()
    idle = make_event(slug="idle")
    event_tick(event_id=idle.id, now=now)  # started, nobody in it
    waiting = make_event(slug="waiting", capacity=0, rate_per_minute=0)
    fans_join(waiting.slug, 2)
    upcoming = make_event(
        slug="upcoming",
        prequeue_opens_at=now + timedelta(hours=1),
        starts_at=now + timedelta(hours=2),
    )
    in_prequeue = make_event(slug="in-prequeue", starts_at=now + timedelta(hours=1))
    fans_join(in_prequeue.slug, 1)
    due = make_event(slug="due", starts_at=now + timedelta(seconds=30))
    later = now + timedelta(minutes=1)  # the start of "due" has passed; no tick made it
    ended = make_event(slug="ended", capacity=1, rate_per_minute=0)
    ended_fans = fans_join(ended.slug, 2)
    event_tick(event_id=ended.id, now=now)
    event_close(event=ended, actor="test", now=now)
    event_tick(event_id=ended.id, now=now)  # the one still waiting is sent away
    assert statuses(ended_fans) == ["admitted", "revoked"]

    assert events_with_fans() == sorted([waiting.id, in_prequeue.id, ended.id])
    # On-sales with nothing scheduled started with their creation; "in-prequeue" starts in
    # an hour.
    assert events_due_to_start(now) == []
    assert events_due_to_start(later) == [due.id]
    assert events_with_work(later) == sorted([waiting.id, in_prequeue.id, ended.id, due.id])
    assert idle.id not in events_with_work(later) and upcoming.id not in events_with_work(later)

    # The shopper leaves the closed on-sale: it costs nothing any more.
    QueueEntry.objects.filter(event=ended, status="admitted").update(
        status="completed", ended_at=now
    )
    assert ended.id not in events_with_work(now)


def test_idle_on_sales_cost_no_query_of_their_own(make_event) -> None:
    now = timezone.now()
    bulk_started("idle", 150)  # running, started, nobody there
    bulk_started(
        "later", 50, prequeue_opens_at=now + timedelta(days=3), starts_at=now + timedelta(days=4)
    )
    bulk_started("ended", 100, control=EventControl.CLOSED)
    busy = make_event(slug="busy", capacity=0, rate_per_minute=0)
    fans_join(busy.slug, 3)
    sent: list[int] = []
    with CaptureQueriesContext(connection) as queries:
        room_dispatch(now=now, send=lambda event_id, claim: sent.append(event_id), claim_seconds=2)
    assert sent == [busy.id]
    # Three queries for the whole room (fans in it; starts due; a draw due), whatever the
    # catalogue's size.
    assert len(queries) == 3
    plan = _explain(queries.captured_queries[0]["sql"])
    assert "one_live_entry_per_identity" in plan
    # The draws' probe reads only the windows not drawn yet (queueing/line/draw.py).
    assert "window_undrawn" in _explain(queries.captured_queries[2]["sql"])


def _explain(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # the plan on a big table, not a tiny one
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_tick_outstanding_is_not_sent_again_until_it_has_run(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=0)
    fans_join(event.slug, 1)
    sent: list[tuple[int, str]] = []

    def dispatch() -> list[int]:
        return room_dispatch(
            now=timezone.now(), send=lambda e, c: sent.append((e, c)), claim_seconds=5
        )

    assert dispatch() == [event.id]
    assert dispatch() == []  # still queued: no second tick behind it
    event_id, claim = sent[0]
    event_beat(event_id=event_id, now=timezone.now(), claim=claim)
    assert dispatch() == [event.id]  # run and released: the next second's tick goes out


def test_a_stale_claim_expires_and_an_old_tick_does_not_release_a_newer_one(
    make_event, redis_client
) -> None:
    event = make_event()
    first = tick_claims.ticks_claim([event.id], ttl_seconds=0.05)[event.id]
    redis_client.delete(keys.tick_claim(event.id))  # as if it expired
    second = tick_claims.ticks_claim([event.id], ttl_seconds=5)[event.id]
    tick_claims.tick_release(event.id, first)  # the old tick, run late
    assert redis_client.get(keys.tick_claim(event.id)).decode() == second
    assert tick_claims.ticks_claim([event.id], ttl_seconds=5) == {}


def test_a_failing_tick_still_releases_its_claim(make_event, monkeypatch) -> None:
    event = make_event()
    claim = tick_claims.ticks_claim([event.id], ttl_seconds=30)[event.id]

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("queueing.beat._event_tick", broken)
    event_beat(event_id=event.id, now=timezone.now(), claim=claim)
    assert tick_claims.ticks_claim([event.id], ttl_seconds=30) != {}


def test_maintenance_looks_only_at_on_sales_with_fans(make_event, redis_client) -> None:
    idle = make_event(slug="idle")
    busy = make_event(slug="busy")
    fans_join(busy.slug, 2)
    for event in (idle, busy):
        redis_client.delete(keys.epoch(event.id))  # Redis lost both indexes
    assert hot_index_maintain() == [busy.id]
    assert epoch.epoch_states([idle.id, busy.id])[busy.id].name == "READY"


def test_a_late_tick_admits_what_the_time_it_missed_earned(make_event) -> None:
    event = make_event(capacity=0, rate_per_minute=600)  # ten a second
    fans_join(event.slug, 100)
    start = timezone.now()
    event_tick(event_id=event.id, now=start)  # starts the line; the first second's ten
    admitted = QueueEntry.objects.filter(event=event, status="admitted").count()
    assert admitted == 10
    # The next tick comes 2.5 s late (a busy worker): it makes up the whole 2.5 s...
    outcome = admission_run(event_id=event.id, now=start + timedelta(seconds=2.5))
    assert len(outcome.admitted) == 25
    # ...but a long silence earns only the burst cap (3 s of pace), never a flood.
    outcome = admission_run(event_id=event.id, now=start + timedelta(seconds=20))
    assert len(outcome.admitted) == 30


def test_a_long_tick_keeps_its_own_claim_and_no_other(make_event, redis_client) -> None:
    event = make_event()
    claim = tick_claims.ticks_claim([event.id], ttl_seconds=1)[event.id]
    assert tick_claims.tick_extend(event.id, claim, ttl_seconds=30)
    assert redis_client.pttl(keys.tick_claim(event.id)) > 20_000
    assert not tick_claims.tick_extend(event.id, "another", ttl_seconds=30)
    redis_client.delete(keys.tick_claim(event.id))  # expired: a newer tick may be running
    assert not tick_claims.tick_extend(event.id, claim, ttl_seconds=30)


def test_a_closed_on_sale_is_broadcast_before_its_line_is_revoked(
    make_event, redis_client, settings
) -> None:
    settings.WR_LINE_END_CHUNK = 2
    settings.WR_LINE_END_SECONDS = 0
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    tickets = fans_join(event.slug, 5)
    event_close(event=event, actor="staff:x", now=timezone.now())
    claim = tick_claims.ticks_claim([event.id], ttl_seconds=5)[event.id]
    event_beat(event_id=event.id, now=timezone.now(), claim=claim)
    told = json.loads(redis_client.get(keys.last_tick(event.id)))
    # The pages were told of the close with the line as it stood, before this tick's chunk.
    assert (told["state"], told["queue_length"]) == ("closed", 5)
    assert statuses(tickets).count("revoked") == 2
    assert tick_claims.ticks_claim([event.id], ttl_seconds=5) != {}  # released


def test_a_closed_on_sale_s_tick_keeps_its_claim_before_its_first_chunk(
    make_event, redis_client, monkeypatch
) -> None:
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    fans_join(event.slug, 2)
    event_close(event=event, actor="staff:x", now=timezone.now())
    claim = tick_claims.ticks_claim([event.id], ttl_seconds=1)[event.id]
    left: list[int] = []

    def revoking(**kwargs: Any) -> int:
        # A first chunk of a long line takes longer than the claim's own second or two.
        left.append(redis_client.pttl(keys.tick_claim(event.id)))
        return 0

    monkeypatch.setattr("queueing.beat.line_revoke_closed", revoking)
    event_beat(event_id=event.id, now=timezone.now(), claim=claim)
    assert left and left[0] > 5_000
