"""The room's scheduler: sends the periodic tasks of CELERY_BEAT_SCHEDULE (the room's tick each
second, the hot-index check...), run as two or more processes of which one leads.

Celery's beat is one process: if it dies, no on-sale starts, nobody expires, nobody is let in
on a tick. Here every replica runs the same loop (``manage.py room_scheduler``):

- Every ``renew_seconds`` it asks PostgreSQL for the lease (``records/scheduler_lease.py``):
  the leader renews it for ``lease_seconds``, a standby takes it once it has run out. A killed
  leader is replaced within ``lease_seconds + renew_seconds``.
- The leader sends each job once per period. A period is a slot, named by its start in
  milliseconds since the epoch on PostgreSQL's clock (the offset to it measured at each
  renewal); before sending, the slot is claimed by a compare-and-set that also checks the
  lease, so no slot is sent twice, even by two processes that both believe they lead. A slot
  missed (no leader, a pause) is not made up for: the next one is sent, as Celery's beat does
  with tasks that have ``expires``.
- Each turn of the loop that reached PostgreSQL touches the heartbeat file, which
  ``room_scheduler --check`` (the container's healthcheck) reads.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from celery import current_app
from celery.schedules import crontab
from celery.schedules import schedule as every
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection

from queueing.records import scheduler_lease

logger = logging.getLogger(__name__)

LEASE_NAME = "room-scheduler"
ROOM_TICK_TASK = "queueing.tasks.room_tick"
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Job:
    """One entry of CELERY_BEAT_SCHEDULE: a task sent every ``period_ms``, or at the minutes a
    crontab names (``cron``)."""

    name: str
    task: str
    period_ms: int
    cron: crontab | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    def slot_at(self, epoch_ms: int) -> int | None:
        """The slot due at ``epoch_ms`` (the start of its period), or None (a crontab's
        minute that does not match)."""
        slot = epoch_ms - epoch_ms % self.period_ms
        if self.cron is None:
            return slot
        minute = datetime.fromtimestamp(slot / 1000, tz=UTC)
        cron = self.cron
        matches = (
            minute.minute in cron.minute
            and minute.hour in cron.hour
            and minute.isoweekday() % 7 in cron.day_of_week
            and minute.day in cron.day_of_month
            and minute.month in cron.month_of_year
        )
        return slot if matches else None


def jobs_from_schedule(schedule: dict[str, dict[str, Any]]) -> list[Job]:
    """The jobs of a CELERY_BEAT_SCHEDULE: seconds (a number, a timedelta, Celery's
    ``schedule``) or a ``crontab`` (read in UTC, to the minute); anything else is refused."""
    jobs = []
    for name, entry in schedule.items():
        every_ = entry["schedule"]
        cron = None
        if isinstance(every_, crontab):
            cron, period_ms = every_, MINUTE_MS
        elif isinstance(every_, every):
            period_ms = round(every_.run_every.total_seconds() * 1000)
        elif isinstance(every_, timedelta):
            period_ms = round(every_.total_seconds() * 1000)
        elif isinstance(every_, int | float):
            period_ms = round(every_ * 1000)
        else:
            raise ImproperlyConfigured(
                f"CELERY_BEAT_SCHEDULE[{name!r}]: the room's scheduler takes seconds or a "
                f"crontab, not {type(every_).__name__}"
            )
        if period_ms < 100:
            raise ImproperlyConfigured(f"CELERY_BEAT_SCHEDULE[{name!r}]: period under 0.1 s")
        jobs.append(
            Job(
                name=name,
                task=entry["task"],
                period_ms=period_ms,
                cron=cron,
                args=tuple(entry.get("args", ())),
                kwargs=dict(entry.get("kwargs", {})),
                options=dict(entry.get("options", {})),
            )
        )
    return jobs


def scheduler_holder() -> str:
    """This process's name in the lease: host, pid and a random part (a pid is reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


Send = Callable[[Job], None]


class RoomScheduler:
    """One replica's loop. ``step`` does one turn and says how long to sleep before the next;
    ``run`` turns until ``stop`` is set, then gives the lease up."""

    def __init__(
        self,
        *,
        jobs: list[Job],
        send: Send,
        holder: str,
        lease_seconds: float,
        renew_seconds: float,
        heartbeat: Path | None = None,
        lease_name: str = LEASE_NAME,
    ) -> None:
        if renew_seconds * 2 > lease_seconds:
            raise ImproperlyConfigured("the lease must last at least two renewals")
        self.jobs, self.send, self.holder = jobs, send, holder
        self.lease_seconds, self.renew_seconds = lease_seconds, renew_seconds
        self.heartbeat, self.lease_name = heartbeat, lease_name
        self.leading_until = 0.0  # monotonic: the lease as this process last knew it
        self.offset = 0.0  # PostgreSQL's clock minus this host's
        self.next_renewal = 0.0  # monotonic
        self.sent_slots: dict[str, int] = {}  # per job, the last slot this process tried
        self.registered = False

    @property
    def leading(self) -> bool:
        return time.monotonic() < self.leading_until

    def db_epoch_ms(self) -> int:
        return math.floor((time.time() + self.offset) * 1000)

    def step(self) -> float:
        try:
            if time.monotonic() >= self.next_renewal:
                self._renew()
            if self.leading:
                self._send_due()
        except DatabaseError:
            logger.exception("scheduler %s: PostgreSQL failed; standing by", self.holder)
            self._lost()
            # A broken connection is dropped, so that the next turn opens a fresh one.
            connection.close()
            self.next_renewal = time.monotonic() + self.renew_seconds
            return self.renew_seconds
        return self._sleep_seconds()

    def run(self, stop: threading.Event) -> None:
        logger.info("scheduler %s started: %d jobs", self.holder, len(self.jobs))
        while not stop.is_set():
            stop.wait(self.step())
        if self.leading:
            try:
                scheduler_lease.lease_release(name=self.lease_name, holder=self.holder)
                logger.info("scheduler %s stopped and gave the lease up", self.holder)
            except DatabaseError:
                logger.exception("scheduler %s could not give the lease up", self.holder)

    def _renew(self) -> None:
        if not self.registered:
            scheduler_lease.jobs_register({job.name: job.task for job in self.jobs})
            self.registered = True
        asked_at, asked_wall = time.monotonic(), time.time()
        held = scheduler_lease.lease_hold(
            name=self.lease_name, holder=self.holder, seconds=self.lease_seconds
        )
        answered_wall = time.time()
        self.next_renewal = asked_at + self.renew_seconds
        self._beat("leader" if held else "standby")
        if held is None:
            self._lost()
            return
        # Counted from before the question: the lease began no earlier on PostgreSQL's side.
        was_leading = self.leading
        self.leading_until = asked_at + self.lease_seconds
        self.offset = held.db_epoch - (asked_wall + answered_wall) / 2
        if not was_leading:
            logger.info("scheduler %s leads (took over: %s)", self.holder, held.taken)

    def _lost(self) -> None:
        if self.leading_until:
            logger.info("scheduler %s stands by", self.holder)
        self.leading_until = 0.0

    def _send_due(self) -> None:
        now_ms = self.db_epoch_ms()
        for job in self.jobs:
            slot = job.slot_at(now_ms)
            if slot is None or slot <= self.sent_slots.get(job.name, -1):
                continue
            self.sent_slots[job.name] = slot
            if not scheduler_lease.slot_claim(
                job=job.name, slot=slot, lease=self.lease_name, holder=self.holder
            ):
                continue
            try:
                self.send(job)
            except Exception:
                # The broker is away: this slot is lost, the next one is tried.
                logger.exception("scheduler %s: %s slot %d not sent", self.holder, job.name, slot)
                continue
            logger.info("sent %s slot %d by %s", job.name, slot, self.holder)

    def _sleep_seconds(self) -> float:
        now = time.monotonic()
        until = self.next_renewal - now
        if self.leading:
            now_ms = self.db_epoch_ms()
            for job in self.jobs:
                next_slot = now_ms - now_ms % job.period_ms + job.period_ms
                until = min(until, (next_slot - now_ms) / 1000)
        # A few milliseconds past the boundary, so that the slot computed on waking is the new one.
        return max(0.0, until) + 0.002

    def _beat(self, role: str) -> None:
        if self.heartbeat is None:
            return
        tmp = self.heartbeat.with_name(self.heartbeat.name + ".tmp")
        tmp.write_text(f"{role} {self.holder}\n")
        tmp.replace(self.heartbeat)


def heartbeat_age(path: Path) -> float | None:
    """Seconds since the scheduler writing ``path`` last reached PostgreSQL; None: never."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except FileNotFoundError:
        return None


def job_send(job: Job) -> None:
    """Send one job's task by name to the workers (the scheduler imports no task module)."""
    # The Celery app config/ builds is the current one once Django has loaded it.
    current_app.send_task(job.task, args=job.args, kwargs=job.kwargs, **job.options)
