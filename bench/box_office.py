"""The box office rows of `make bench`: a thousand on-sales configured, a few busy.

1. Idle: 990 on-sales configured (running with nobody in them, scheduled, ended), beat and one
   worker running for a while: the workers' and the beat's CPU, per core.
2. Busy: 10 of them get 2,000 waiting fans each at 600 admissions a minute: admissions of each
   over 60 s against the pace, and the interval between the live ticks each receives, as a
   page does (subscribed to its channel group).
3. Scaling: 300 on-sales with fans in them (paused, so the work stays the same), with one and
   then two worker processes: on-sale ticks completed per second, counted from the workers'
   logs.

Called by bench/run.py (through bench/table_rows.py) on a fresh database, after the other rows,
with Django set up.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import os
import re
import time
from pathlib import Path
from typing import Any

from bench.load import percentile

BUSY, BUSY_FANS, BUSY_RATE = 10, 2_000, 600
IDLE_RUNNING, IDLE_SCHEDULED, ENDED = 600, 300, 90
SCALING_EVENTS, SCALING_FANS = 300, 3


def _stat_fields(stat: Path) -> list[str] | None:
    """A /proc/<pid>/stat's fields after the command: state, ppid, pgrp, ... utime (12th),
    stime, cutime, cstime; None once the process is gone."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def group_cpu_seconds(pgid: int) -> float:
    """CPU time (user + system, children included) of every process in a process group."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields is not None and int(fields[2]) == pgid:
            total += sum(int(v) for v in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def pids_cpu_seconds(pids: list[int]) -> float:
    """CPU time (user + system) of some processes, each alone: PostgreSQL's backends share
    the server's process group with every other database's."""
    total = 0
    for pid in pids:
        fields = _stat_fields(Path(f"/proc/{pid}/stat"))
        if fields is not None:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def catalogue() -> dict[str, list[int]]:
    """The thousand on-sales, created in bulk (as event_create leaves them)."""
    from django.utils import timezone

    from events.models import EventControl
    from tests.events.bulk import bulk_events

    now = timezone.now()
    later = now + dt.timedelta(days=7)

    def made(kind: str, count: int, **fields: Any) -> list[int]:
        return [
            e.pk for e in bulk_events([{"slug": f"{kind}-{i}", **fields} for i in range(count)])
        ]

    return {
        "running": made(
            "running", IDLE_RUNNING, started_at=now, heartbeat_seconds=3600, session_seconds=3600
        ),
        "scheduled": made("scheduled", IDLE_SCHEDULED, prequeue_opens_at=later, starts_at=later),
        "ended": made("ended", ENDED, control=EventControl.CLOSED, started_at=now, closed_at=now),
        "busy": made(
            "busy",
            BUSY,
            capacity=0,
            rate_per_minute=BUSY_RATE,
            heartbeat_seconds=3600,
            session_seconds=3600,
            started_at=now,
        ),
    }


def fill(event_ids: list[int], fans: int) -> None:
    """``fans`` waiting fans in each on-sale (one COPY), then their hot indexes."""
    from bench.waiting_rows import copy_waiting
    from events.models import Tier
    from queueing.line.index_sync import hot_index_rebuild

    tiers = dict(Tier.objects.filter(event_id__in=event_ids).values_list("event_id", "id"))
    copy_waiting(
        (event_id, tiers[event_id], f"bo-{event_id}-{i}")
        for event_id in event_ids
        for i in range(fans)
    )
    for event_id in event_ids:
        assert hot_index_rebuild(event_id=event_id)


async def _listen(event_ids: list[int], seconds: float) -> dict[int, list[float]]:
    """When each on-sale's live ticks arrive, as a page subscribed to them sees them."""
    from channels.layers import get_channel_layer

    from queueing.hot.channels import event_group

    layer = get_channel_layer()
    arrivals: dict[int, list[float]] = {event_id: [] for event_id in event_ids}

    async def listen(event_id: int) -> None:
        channel = await layer.new_channel()
        await layer.group_add(event_group(event_id), channel)
        while True:
            await layer.receive(channel)
            arrivals[event_id].append(time.monotonic())

    tasks = [asyncio.create_task(listen(event_id)) for event_id in event_ids]
    await asyncio.sleep(seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return arrivals


# A finished tick in a worker's log: the room's JSON line (LOG_FORMAT=json, the time in UTC),
# its plain line, or Celery's own format (the earlier source trees bench/far_back.py runs).
_SUCCEEDED = re.compile(
    r'^(?:\{"time": "(?P<utc>[^"]+)".*"message": "Task queueing\.tasks\.event_tick\[[^\]]+\] '
    r"succeeded"
    r"|(?P<plain>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ INFO celery\.app\.trace \[[^\]]*\] "
    r"Task queueing\.tasks\.event_tick\[[^\]]+\] succeeded"
    r"|\[(?P<celery>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+: INFO/[^\]]+\] "
    r"Task queueing\.tasks\.event_tick\[[^\]]+\] succeeded)",
    re.M,
)


def ticks_completed(logs: list[str], since: dt.datetime, until: dt.datetime) -> int:
    """event_tick tasks that finished between two local times, from the workers' logs."""
    done = 0
    for log in logs:
        for match in _SUCCEEDED.finditer(log):
            if match["utc"]:
                at = dt.datetime.fromisoformat(match["utc"]).astimezone().replace(tzinfo=None)
            else:
                at = dt.datetime.strptime(match["plain"] or match["celery"], "%Y-%m-%d %H:%M:%S")
            done += since <= at < until
    return done


def run(
    stack_factory: Any, measure_seconds: int, idle_seconds: int, scaling_seconds: int
) -> dict[str, Any]:
    from django.utils import timezone

    from events.models import Event, EventControl
    from queueing.models import QueueEntry

    events = catalogue()
    result: dict[str, Any] = {"configured": sum(len(ids) for ids in events.values())}

    print(f"5a. box office, idle: {result['configured']:,} on-sales, {idle_seconds} s", flush=True)
    stack = stack_factory("box-idle")
    try:
        worker = stack.worker(name="worker", concurrency=2)
        beat = stack.beat()
        time.sleep(5)  # started and settled
        cpu = group_cpu_seconds(worker.pid), group_cpu_seconds(beat.pid)
        time.sleep(idle_seconds)
        cpu_after = group_cpu_seconds(worker.pid), group_cpu_seconds(beat.pid)
    finally:
        stack.stop()
    result["idle"] = {
        "seconds": idle_seconds,
        "worker_cpu_pct_of_core": round(100 * (cpu_after[0] - cpu[0]) / idle_seconds, 2),
        "beat_cpu_pct_of_core": round(100 * (cpu_after[1] - cpu[1]) / idle_seconds, 2),
    }

    print(f"5b. box office, {BUSY} busy with {BUSY_FANS:,} each: {measure_seconds} s", flush=True)
    fill(events["busy"], BUSY_FANS)
    stack = stack_factory("box-busy")
    try:
        stack.worker(name="worker", concurrency=2)
        stack.beat()
        warmup = 5
        arrivals = asyncio.run(_listen(events["busy"], warmup + measure_seconds))
        measured_until = timezone.now()
    finally:
        stack.stop()
    window_end = measured_until
    window_start = window_end - dt.timedelta(seconds=measure_seconds)
    per_event = [
        QueueEntry.objects.filter(
            event_id=event_id, admitted_at__gte=window_start, admitted_at__lt=window_end
        ).count()
        for event_id in events["busy"]
    ]
    expected = BUSY_RATE * measure_seconds / 60
    intervals = [
        later - earlier
        for times in arrivals.values()
        for earlier, later in itertools.pairwise(times)
        if earlier >= times[0] + warmup
    ]
    result["busy"] = {
        "on_sales": BUSY,
        "fans_each": BUSY_FANS,
        "rate_per_minute": BUSY_RATE,
        "seconds": measure_seconds,
        "admitted_each": per_event,
        "expected_each": expected,
        "worst_pace_error_pct": round(
            100 * max(abs(n - expected) for n in per_event) / expected, 1
        ),
        "tick_interval_p50_s": round(percentile(intervals, 50), 3) if intervals else None,
        "tick_interval_p99_s": round(percentile(intervals, 99), 3) if intervals else None,
        "tick_interval_max_s": round(max(intervals), 3) if intervals else None,
        "ticks_received": len(intervals),
    }

    print(f"5c. box office, scaling: {SCALING_EVENTS} busy on-sales, 1 and 2 workers", flush=True)
    Event.objects.filter(pk__in=events["busy"]).update(control=EventControl.CLOSED)
    QueueEntry.objects.filter(event_id__in=events["busy"]).delete()
    scaling = events["running"][:SCALING_EVENTS]
    fill(scaling, SCALING_FANS)
    Event.objects.filter(pk__in=scaling).update(control=EventControl.PAUSED)
    result["scaling"] = {"on_sales": SCALING_EVENTS}
    for workers in (1, 2):
        stack = stack_factory(f"box-scaling-{workers}")
        try:
            names = [f"worker-{n}" for n in range(workers)]
            for name in names:
                stack.worker(name=name, concurrency=1)
            stack.beat()
            time.sleep(5)
            since = dt.datetime.now()
            time.sleep(scaling_seconds)
            until = dt.datetime.now()
            time.sleep(1)  # the last lines written
            done = ticks_completed([stack.log(name) for name in names], since, until)
        finally:
            stack.stop()
        result["scaling"][f"ticks_per_s_{workers}_worker"] = round(done / scaling_seconds, 1)
    one, two = result["scaling"]["ticks_per_s_1_worker"], result["scaling"]["ticks_per_s_2_worker"]
    result["scaling"]["ratio"] = round(two / one, 2) if one else None
    return result
