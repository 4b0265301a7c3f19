"""The room's scheduler with real processes: two replicas, one worker, an on-sale letting fans
in at its pace; the leading scheduler is killed (SIGKILL) mid-admission. The standby leads
within 3 s, fans go on being let in at the pace and never above it, no period of the tick is
sent twice, nobody is let in twice (queueing/scheduler.py)."""

from __future__ import annotations

import itertools
import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter

import pytest
from django.conf import settings
from django.test import Client

from queueing.models import AuditRecord, QueueEntry, SchedulerLease
from queueing.scheduler import LEASE_NAME
from tests.helpers import fans_join
from tests.processes import BIN, ROOT, running_stack, scheduler_check_command, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

RATE_PER_MINUTE = 120  # 2 a second
FANS = 80  # more than the test lets in: the line never runs dry
TAKEOVER_SECONDS = 3.0
SENT = re.compile(r"sent (\S+) slot (\d+) by (\S+)")


def _holder() -> str:
    return SchedulerLease.objects.get(name=LEASE_NAME).holder


def _pid_of(holder: str) -> int:
    return int(holder.split(":")[-2])


def _admitted_times(event) -> list[float]:
    return sorted(
        a.timestamp()
        for a in QueueEntry.objects.filter(event=event, admitted_at__isnull=False).values_list(
            "admitted_at", flat=True
        )
    )


def _most_in_any_window(times: list[float], seconds: float) -> int:
    return max(
        (sum(1 for t in times[i:] if t < start + seconds) for i, start in enumerate(times)),
        default=0,
    )


def test_killing_the_leading_scheduler_mid_admission_loses_no_pace_and_doubles_nothing(
    make_event,
) -> None:
    event = make_event(capacity=0, rate_per_minute=RATE_PER_MINUTE, heartbeat_seconds=600)
    fans_join(event.slug, FANS)
    with running_stack() as stack:
        stack.worker(concurrency=2)
        schedulers = {name: stack.beat(name) for name in ("scheduler-1", "scheduler-2")}
        wait_until(
            lambda: QueueEntry.objects.filter(event=event, status="admitted").count() >= 8,
            timeout=30,
            what="the first admissions",
        )
        leader = _holder()
        (leader_name,) = [n for n, p in schedulers.items() if p.pid == _pid_of(leader)]
        (standby_name,) = set(schedulers) - {leader_name}
        os.killpg(schedulers[leader_name].pid, signal.SIGKILL)
        killed_at = time.time()
        new_holder = wait_until(
            lambda: (h := _holder()) != leader and h,
            timeout=10,
            what="the standby to lead",
            interval=0.05,
        )
        took_over_in = time.time() - killed_at
        assert _pid_of(new_holder) == schedulers[standby_name].pid
        time.sleep(8)  # admission under the new leader

        # The healthchecks: the survivor's loop is alive, the killed one's is not.
        check_env = {**stack.env}

        def check(name: str) -> int:
            return subprocess.run(
                scheduler_check_command(heartbeat=stack.heartbeat(name)),
                cwd=ROOT,
                env=check_env,
                capture_output=True,
                timeout=60,
            ).returncode

        assert check(standby_name) == 0
        assert check(leader_name) == 1
        # The worker's healthcheck (docker-compose.yml): a ping through the broker.
        node = f"worker-{os.getpid()}@{socket.gethostname()}"
        ping = subprocess.run(
            [str(BIN / "celery"), "-A", "config", "inspect", "ping", "-d", node, "--timeout", "5"],
            cwd=ROOT,
            env=check_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert ping.returncode == 0, ping.stdout + ping.stderr
        metrics = Client().get("/metrics").content.decode()
        sent_log = stack.log(leader_name) + stack.log(standby_name)

    assert took_over_in <= TAKEOVER_SECONDS, took_over_in

    # No period of any job sent twice, by either scheduler; the tick sent by both in turn.
    sent = [(job, int(slot), by) for job, slot, by in SENT.findall(sent_log)]
    assert max(Counter((job, slot) for job, slot, _ in sent).values()) == 1
    ticks = sorted((slot, by) for job, slot, by in sent if job == "room-tick")
    senders = [by for _, by in ticks]
    assert senders[0] == leader and senders[-1] == new_holder
    assert senders == sorted(senders, key=lambda by: by != leader)  # one hand-over, no return
    tick_gaps = [b - a for (a, _), (b, _) in itertools.pairwise(ticks)]
    assert max(tick_gaps) <= TAKEOVER_SECONDS * 1000 + 1000

    # Nobody let in twice: one "admitted" record per fan admitted, and each fan's at most one.
    admitted = QueueEntry.objects.filter(event=event, admitted_at__isnull=False).count()
    records = Counter(
        AuditRecord.objects.filter(event=event, action="admitted").values_list(
            "ticket_id", flat=True
        )
    )
    assert len(records) == admitted and max(records.values()) == 1

    # The pace: never above it in any window, and going on after the hand-over.
    times = _admitted_times(event)
    burst = settings.WR_ADMISSION_BURST_SECONDS
    per_second = RATE_PER_MINUTE / 60
    for window in (5, 10):
        assert _most_in_any_window(times, window) <= per_second * (window + burst) + 1
    after = [t for t in times if t > killed_at + TAKEOVER_SECONDS]
    assert len(after) >= per_second * 4, (len(after), killed_at, times)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) <= TAKEOVER_SECONDS + 2, gaps

    age = re.search(r"^waitingroom_room_tick_age_seconds (\S+)$", metrics, re.M)
    assert age is not None and float(age.group(1)) < 2.0
    changes = re.search(r"^waitingroom_scheduler_leader_changes_total (\S+)$", metrics, re.M)
    assert changes is not None and float(changes.group(1)) == 2
