"""Nobody loses their place to a Redis outage (hot/heartbeat_clock.py): after a gap in the
room's beat, no fan expires for silence until everyone had a whole heartbeat window."""

from __future__ import annotations

import time
from datetime import timedelta

from django.utils import timezone

from queueing.hot import heartbeat_clock
from queueing.line.admission import admission_run
from queueing.line.expiry import queued_expire_unseen
from queueing.line.schedule import line_start
from queueing.models import QueueEntry
from tests.conftest import join, new_fan


def test_a_gap_in_the_beat_starts_a_new_since() -> None:
    t0 = time.time()
    assert heartbeat_clock.beat_mark(t0) == t0
    assert heartbeat_clock.beat_mark(t0 + 1) == t0  # beats a second apart: no gap
    assert heartbeat_clock.beat_mark(t0 + 2.5) == t0
    assert heartbeat_clock.beat_mark(t0 + 10) == t0 + 10  # Redis was away for 7.5 s
    assert heartbeat_clock.recorded_since() == t0 + 10
    assert heartbeat_clock.expiry_waits(now=t0 + 39, heartbeat_seconds=30)
    assert not heartbeat_clock.expiry_waits(now=t0 + 40.5, heartbeat_seconds=30)


def test_back_without_its_data_is_a_gap_too(redis_client) -> None:
    t0 = time.time()
    heartbeat_clock.beat_mark(t0)
    redis_client.flushdb()  # a Redis restarted without persistence
    assert heartbeat_clock.beat_mark(t0 + 1) == t0 + 1


def test_never_marked_waits_for_nothing() -> None:
    assert heartbeat_clock.recorded_since() is None
    assert not heartbeat_clock.expiry_waits(now=time.time(), heartbeat_seconds=30)


def _silent_fans(make_event, n: int):
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=30)
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(n)]
    return event, tickets


def test_silent_fans_are_kept_in_the_window_after_an_outage(make_event) -> None:
    """Deadlines that fell in an outage are not held against anyone until the window after
    it is over; then the silent expire as ever."""
    event, _ = _silent_fans(make_event, 3)
    later = timezone.now() + timedelta(minutes=5)  # every deadline long past
    heartbeat_clock.beat_mark(later.timestamp() - 60)
    heartbeat_clock.beat_mark(later.timestamp() - 10)  # back 10 s ago after a 50 s gap
    assert queued_expire_unseen(event_id=event.id, now=later, heartbeat_seconds=30) == 0
    assert set(QueueEntry.objects.values_list("status", flat=True)) == {"waiting"}
    after = later + timedelta(seconds=21)  # a whole window after Redis came back
    assert queued_expire_unseen(event_id=event.id, now=after, heartbeat_seconds=30) == 3


def test_admission_lets_in_rather_than_expires_in_that_window(make_event) -> None:
    event, _ = _silent_fans(make_event, 2)
    line_start(event_id=event.id, now=timezone.now())
    later = timezone.now() + timedelta(minutes=5)
    heartbeat_clock.beat_mark(later.timestamp() - 60)
    heartbeat_clock.beat_mark(later.timestamp() - 5)
    outcome = admission_run(event_id=event.id, now=later)
    assert (len(outcome.admitted), len(outcome.expired)) == (2, 0)


def test_without_an_outage_the_silent_still_expire(make_event) -> None:
    event, _ = _silent_fans(make_event, 2)
    later = timezone.now() + timedelta(minutes=5)
    for second in range(61):  # a beat every second for the last minute
        heartbeat_clock.beat_mark(later.timestamp() - 60 + second)
    assert queued_expire_unseen(event_id=event.id, now=later, heartbeat_seconds=30) == 2
