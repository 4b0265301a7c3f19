"""A fan who joins a laned line after its summary was read is counted behind the other lanes'
fans who joined meanwhile, which the summary does not hold: their join view
(queueing/line/join_views.py), exact as of the join, less those let in since."""

from __future__ import annotations

import pytest
from django.utils import timezone

from queueing.hot import keys
from queueing.line.admission import admission_run
from queueing.line.joining import JoinRequest, JoinResult, entry_join_many
from queueing.line.lanes import lanes_summary_publish
from queueing.line.reads import event_layout
from queueing.models import QueueEntry
from queueing.records.entry_reads import IN_ORDER
from tests.helpers import entry_of, poll

pytestmark = pytest.mark.django_db


def _join(event, identities: list[str]) -> list[JoinResult]:
    now = timezone.now()
    outcomes = entry_join_many(
        [JoinRequest(event=event, identity=i, access_code=None, now=now) for i in identities]
    )
    assert all(isinstance(o, JoinResult) for o in outcomes)
    return outcomes


def _exact_position(ticket: str) -> int:
    entry = entry_of(ticket)
    ahead = QueueEntry.objects.filter(
        IN_ORDER, event_id=entry.event_id, tier_id=entry.tier_id, order_key__lt=entry.order_key
    )
    return ahead.count() + 1


def _line_with_a_stale_summary(make_event, settings, **fields):
    """40 in line when the summary was read (and kept by every process), 120 since."""
    event = make_event(lanes=4, heartbeat_seconds=3600, **fields)
    settings.WR_LANES_SUMMARY_SECONDS = 60
    settings.WR_LANES_SUMMARY_STALE_SECONDS = 60
    _join(event, [f"early-{i}" for i in range(40)])
    assert lanes_summary_publish(event_layout(event.id), ttl_seconds=60) is not None
    _join(event, [f"burst-{i}" for i in range(120)])
    return event


def test_a_fan_who_joined_after_the_summary_is_told_everyone_ahead(make_event, settings):
    event = _line_with_a_stale_summary(make_event, settings, capacity=0)
    (late,) = _join(event, ["late"])
    assert late.answer.position == _exact_position(late.answer.ticket) == 161
    assert not late.answer.approximate
    # Their polls read the view kept in their lane, while it is newer than the summary.
    answer = poll(late.answer.ticket)
    assert (answer["position"], answer["approximate"]) == (161, False)


def test_those_let_in_since_the_join_are_taken_off(make_event, settings) -> None:
    event = _line_with_a_stale_summary(make_event, settings, capacity=30, rate_per_minute=0)
    (late,) = _join(event, ["late"])
    assert late.answer.position == 161
    # Admission alone, without a tick's new summary: the view and the counts it keeps.
    admission_run(event_id=event.id, now=timezone.now())
    assert QueueEntry.objects.filter(event=event, status="admitted").count() == 30
    assert poll(late.answer.ticket)["position"] == _exact_position(late.answer.ticket) == 131


def test_a_newer_summary_takes_over_from_the_view(make_event, settings) -> None:
    event = _line_with_a_stale_summary(make_event, settings, capacity=0)
    (late,) = _join(event, ["late"])
    _join(event, [f"after-{i}" for i in range(20)])  # behind the late fan: not ahead of them
    assert lanes_summary_publish(event_layout(event.id), ttl_seconds=60) is not None
    answer = poll(late.answer.ticket)
    assert answer["position"] == 161
    assert answer["queue_length"] == 181  # the summary holds those behind too


def test_a_view_is_kept_for_a_few_seconds_only(make_event, settings, redis_client) -> None:
    event = _line_with_a_stale_summary(make_event, settings, capacity=0)
    (late,) = _join(event, ["late"])
    entry = entry_of(late.answer.ticket)
    ttl = redis_client.ttl(keys.join_view(event.id, entry.id, entry.lane))
    assert 0 < ttl <= 1 + 60 + 60  # the tick's second, a process's cache, the stale limit


def test_a_line_of_one_lane_keeps_no_views(make_event, redis_client) -> None:
    event = make_event(lanes=1, capacity=0)
    (fan,) = _join(event, ["fan"])
    entry = entry_of(fan.answer.ticket)
    assert not redis_client.exists(keys.join_view(event.id, entry.id, 0))


def test_a_batch_over_several_lanes_is_counted_once_in_each_lane(make_event, monkeypatch):
    from queueing.hot import line_index

    event = make_event(lanes=4, capacity=0)
    asked: list[list[int]] = []
    real = line_index.lanes_counts_below

    def counted(layout, asks):
        asked.append(sorted(asks))
        return real(layout, asks)

    monkeypatch.setattr(line_index, "lanes_counts_below", counted)
    joined = _join(event, [f"fan-{i}" for i in range(40)])
    assert QueueEntry.objects.values("lane").distinct().count() == 4  # four parts
    assert asked == [[0, 1, 2, 3]]  # one round trip, each lane once
    # Their order keys follow the lanes (docs/api.md); each is told their exact place.
    assert sorted(o.answer.position for o in joined) == list(range(1, 41))
    assert all(o.answer.position == _exact_position(o.answer.ticket) for o in joined)
