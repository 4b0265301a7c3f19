"""The room's scheduler: its jobs from the settings, and two replicas in one process against the
real PostgreSQL, one leading, the other taking over, no slot sent twice."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from celery.schedules import crontab
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from queueing.scheduler import Job, RoomScheduler, jobs_from_schedule

LEASE = "test-scheduler"
LEASE_SECONDS, RENEW_SECONDS = 1.0, 0.2


def test_the_jobs_are_the_settings_schedule() -> None:
    jobs = {job.name: job for job in jobs_from_schedule(settings.CELERY_BEAT_SCHEDULE)}
    tick = jobs["room-tick"]
    assert tick.task == "queueing.tasks.room_tick"
    assert tick.period_ms == round(settings.WR_TICK_SECONDS * 1000)
    assert tick.options == {"expires": settings.WR_TICK_SECONDS}
    assert tick.slot_at(12_345_678) == 12_345_678 - 12_345_678 % tick.period_ms


def test_a_daily_job_in_seconds_or_a_crontab_is_due_once_a_day() -> None:
    daily, nightly = jobs_from_schedule(
        {
            "daily": {"task": "t", "schedule": timedelta(days=1)},
            "nightly": {"task": "t", "schedule": crontab(minute=30, hour=3)},
        }
    )
    at = datetime(2026, 11, 27, 3, 30, 20, tzinfo=UTC)
    ms = int(at.timestamp() * 1000)
    midnight = int(datetime(2026, 11, 27, tzinfo=UTC).timestamp() * 1000)
    assert daily.slot_at(ms) == midnight
    assert nightly.slot_at(ms) == ms - 20_000
    assert nightly.slot_at(ms + 60_000) is None


@pytest.mark.parametrize("every", [0.01, "1s", object()])
def test_a_schedule_the_scheduler_cannot_keep_is_refused(every: object) -> None:
    with pytest.raises(ImproperlyConfigured):
        jobs_from_schedule({"odd": {"task": "t", "schedule": every}})


def _replica(holder: str, sent: list[tuple[str, int, str]], jobs: list[Job]) -> RoomScheduler:
    replica: RoomScheduler

    def send(job: Job) -> None:
        sent.append((job.name, replica.sent_slots[job.name], holder))

    replica = RoomScheduler(
        jobs=jobs,
        send=send,
        holder=holder,
        lease_seconds=LEASE_SECONDS,
        renew_seconds=RENEW_SECONDS,
        lease_name=LEASE,
    )
    return replica


def _turn(replicas: list[RoomScheduler], seconds: float) -> None:
    """Each replica's loop, interleaved in this thread, for ``seconds``."""
    wake = {id(replica): 0.0 for replica in replicas}
    deadline = time.monotonic() + seconds
    while (now := time.monotonic()) < deadline:
        for replica in replicas:
            if now >= wake[id(replica)]:
                wake[id(replica)] = now + replica.step()
        time.sleep(max(0.0, min(min(wake.values()), deadline) - time.monotonic()))


@pytest.mark.django_db
def test_one_of_two_leads_and_the_other_takes_over_without_sending_a_slot_twice() -> None:
    jobs = jobs_from_schedule({"tick": {"task": "t", "schedule": 0.2}})
    sent: list[tuple[str, int, str]] = []
    a, b = _replica("a", sent, jobs), _replica("b", sent, jobs)
    _turn([a, b], 1.5)
    assert [r.leading for r in (a, b)].count(True) == 1
    leader, standby = (a, b) if a.leading else (b, a)
    assert {holder for _, _, holder in sent} == {leader.holder}

    # The leader stops (killed: it does not give the lease up); the standby goes on alone.
    stopped_at = time.monotonic()
    _turn([standby], LEASE_SECONDS + RENEW_SECONDS + 0.8)
    assert standby.leading
    taken_over = [slot for _, slot, holder in sent if holder == standby.holder]
    assert taken_over

    slots = [slot for _, slot, _ in sent]
    assert max(Counter(slots).values()) == 1 and slots == sorted(slots)
    # Every period was sent but those in the lease's last stretch.
    period = jobs[0].period_ms
    gaps = [later - earlier for earlier, later in itertools.pairwise(slots)]
    assert max(gaps) <= (LEASE_SECONDS + RENEW_SECONDS) * 1000 + 2 * period
    assert gaps.count(period) >= len(gaps) - 1
    assert time.monotonic() - stopped_at < 3


@pytest.mark.django_db
def test_two_that_both_believe_they_lead_send_each_slot_once() -> None:
    jobs = jobs_from_schedule({"tick": {"task": "t", "schedule": 0.1}})
    sent: list[tuple[str, int, str]] = []
    a, b = _replica("a", sent, jobs), _replica("b", sent, jobs)
    _turn([a, b], 0.5)
    leader, other = (a, b) if a.leading else (b, a)
    # The other is told it leads (a stale belief: paused past its lease, a clock gone wrong).
    other.leading_until = time.monotonic() + 60
    other.next_renewal = time.monotonic() + 60
    _turn([a, b], 1.0)
    slots = [slot for _, slot, _ in sent]
    assert max(Counter(slots).values()) == 1
    assert {holder for _, _, holder in sent} == {leader.holder}


@pytest.mark.django_db
def test_a_stopping_leader_gives_the_lease_up_to_the_standby_at_once() -> None:
    jobs = jobs_from_schedule({"tick": {"task": "t", "schedule": 0.2}})
    sent: list[tuple[str, int, str]] = []
    a, b = _replica("a", sent, jobs), _replica("b", sent, jobs)
    a.step()
    assert a.leading
    stop = threading.Event()
    stop.set()
    a.run(stop)  # stops at once, giving the lease up
    b.step()
    assert b.leading


@pytest.mark.django_db
def test_the_healthcheck_reads_the_heartbeat_of_the_loop(tmp_path: Path) -> None:
    heartbeat = tmp_path / "scheduler.heartbeat"
    with pytest.raises(SystemExit) as never:
        call_command("room_scheduler", "--heartbeat-file", str(heartbeat), "--check")
    assert never.value.code == 1
    replica = RoomScheduler(
        jobs=[],
        send=lambda job: None,
        holder="a",
        lease_seconds=LEASE_SECONDS,
        renew_seconds=RENEW_SECONDS,
        heartbeat=heartbeat,
        lease_name=LEASE,
    )
    replica.step()
    assert heartbeat.read_text() == "leader a\n"
    call_command("room_scheduler", "--heartbeat-file", str(heartbeat), "--check")
    old = time.time() - 60
    os.utime(heartbeat, (old, old))
    with pytest.raises(SystemExit) as stale:
        call_command("room_scheduler", "--heartbeat-file", str(heartbeat), "--check")
    assert stale.value.code == 1


@pytest.mark.django_db
def test_a_slot_the_broker_refused_is_not_sent_again_and_the_next_one_is() -> None:
    jobs = jobs_from_schedule({"tick": {"task": "t", "schedule": 0.2}})
    sent: list[int] = []
    refusals: list[int] = []
    replica: RoomScheduler

    def send(job: Job) -> None:
        slot = replica.sent_slots[job.name]
        if not refusals:
            refusals.append(slot)
            raise ConnectionRefusedError
        sent.append(slot)

    replica = RoomScheduler(
        jobs=jobs,
        send=send,
        holder="a",
        lease_seconds=LEASE_SECONDS,
        renew_seconds=RENEW_SECONDS,
        lease_name=LEASE,
    )
    _turn([replica], 0.7)
    assert refusals and sent and refusals[0] not in sent
    assert min(sent) > refusals[0]
