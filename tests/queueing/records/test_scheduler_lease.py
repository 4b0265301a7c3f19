"""The scheduler's lease and fence, on the real PostgreSQL."""

from __future__ import annotations

import time

import pytest

from queueing.models import SchedulerJob, SchedulerLease
from queueing.records.scheduler_lease import (
    jobs_register,
    lease_hold,
    lease_release,
    scheduler_state,
    slot_claim,
)

pytestmark = pytest.mark.django_db

LEASE = "test-lease"


def test_one_holder_at_a_time_and_the_lease_goes_when_it_runs_out() -> None:
    first = lease_hold(name=LEASE, holder="a", seconds=0.3)
    assert first is not None and first.taken
    assert first.expires_epoch == pytest.approx(first.db_epoch + 0.3, abs=0.01)
    assert lease_hold(name=LEASE, holder="b", seconds=0.3) is None
    renewed = lease_hold(name=LEASE, holder="a", seconds=0.3)
    assert renewed is not None and not renewed.taken
    time.sleep(0.35)
    taken = lease_hold(name=LEASE, holder="b", seconds=0.3)
    assert taken is not None and taken.taken
    lease = SchedulerLease.objects.get(name=LEASE)
    assert (lease.holder, lease.leader_changes) == ("b", 2)


def test_a_lease_given_up_is_taken_at_once() -> None:
    assert lease_hold(name=LEASE, holder="a", seconds=30) is not None
    assert not lease_release(name=LEASE, holder="b")
    assert lease_release(name=LEASE, holder="a")
    assert lease_hold(name=LEASE, holder="b", seconds=30) is not None


def test_a_slot_is_claimed_once_by_the_holder_of_an_unexpired_lease_only() -> None:
    jobs_register({"tick": "queueing.tasks.room_tick"})
    lease_hold(name=LEASE, holder="a", seconds=0.3)
    assert slot_claim(job="tick", slot=1000, lease=LEASE, holder="a")
    assert not slot_claim(job="tick", slot=1000, lease=LEASE, holder="a")
    assert not slot_claim(job="tick", slot=999, lease=LEASE, holder="a")
    # Believing it leads is not enough: "b" holds no lease.
    assert not slot_claim(job="tick", slot=2000, lease=LEASE, holder="b")
    time.sleep(0.35)
    # Nor is having held it: "a"'s ran out (paused, cut off), though nobody took it since.
    assert not slot_claim(job="tick", slot=2000, lease=LEASE, holder="a")
    lease_hold(name=LEASE, holder="b", seconds=0.3)
    assert slot_claim(job="tick", slot=2000, lease=LEASE, holder="b")
    job = SchedulerJob.objects.get(name="tick")
    assert (job.last_slot, job.sent_by) == (2000, "b")


def test_registering_again_keeps_the_last_slot_and_follows_the_task_name() -> None:
    jobs_register({"tick": "old.task"})
    lease_hold(name=LEASE, holder="a", seconds=30)
    assert slot_claim(job="tick", slot=5000, lease=LEASE, holder="a")
    jobs_register({"tick": "queueing.tasks.room_tick"})
    job = SchedulerJob.objects.get(name="tick")
    assert (job.task, job.last_slot) == ("queueing.tasks.room_tick", 5000)


def test_the_state_says_how_old_the_last_room_tick_is() -> None:
    empty = scheduler_state(lease=LEASE, tick_task="queueing.tasks.room_tick")
    assert (empty.room_tick_age_seconds, empty.leader_changes) == (None, 0)
    jobs_register({"tick": "queueing.tasks.room_tick", "other": "x.y"})
    lease_hold(name=LEASE, holder="a", seconds=30)
    slot_claim(job="tick", slot=1, lease=LEASE, holder="a")
    time.sleep(0.2)
    slot_claim(job="other", slot=1, lease=LEASE, holder="a")
    state = scheduler_state(lease=LEASE, tick_task="queueing.tasks.room_tick")
    assert 0.2 <= state.room_tick_age_seconds < 1.0
    assert state.leader_changes == 1
