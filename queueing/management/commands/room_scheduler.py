import signal
import sys
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from queueing.observability import observability_setup
from queueing.scheduler import (
    RoomScheduler,
    heartbeat_age,
    job_send,
    jobs_from_schedule,
    scheduler_holder,
)


class Command(BaseCommand):
    help = (
        "Send CELERY_BEAT_SCHEDULE's tasks, one replica of several leading through a lease in "
        "PostgreSQL (queueing/scheduler.py); --check: exit 1 unless this replica's loop reached "
        "PostgreSQL lately (the container's healthcheck)."
    )
    # Neither the loop nor its healthcheck (every few seconds) runs the system checks: they
    # reach Redis and claim its prefix, which is migrate's and the web's business.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--heartbeat-file",
            type=Path,
            required=True,
            help="touched by each turn of the loop that reached PostgreSQL; --check reads it",
        )
        parser.add_argument("--check", action="store_true", help="healthcheck, then exit")

    def handle(self, *args: Any, heartbeat_file: Path, check: bool, **options: Any) -> None:
        if check:
            self._check(heartbeat_file)
            return
        # The loop's sends of tasks start their traces; its failures are reported.
        observability_setup(service="scheduler")
        heartbeat_file.parent.mkdir(parents=True, exist_ok=True)
        heartbeat_file.unlink(missing_ok=True)
        scheduler = RoomScheduler(
            jobs=jobs_from_schedule(settings.CELERY_BEAT_SCHEDULE),
            send=job_send,
            holder=scheduler_holder(),
            lease_seconds=settings.WR_SCHEDULER_LEASE_SECONDS,
            renew_seconds=settings.WR_SCHEDULER_RENEW_SECONDS,
            heartbeat=heartbeat_file,
        )
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        scheduler.run(stop)

    def _check(self, heartbeat_file: Path) -> None:
        age = heartbeat_age(heartbeat_file)
        # Three renewals missed (a busy machine may miss one): the loop is stuck or cut off.
        limit = max(3 * settings.WR_SCHEDULER_RENEW_SECONDS, 2.0)
        if age is None or age > limit:
            said = "never" if age is None else f"{age:.1f} s ago"
            self.stderr.write(f"scheduler unhealthy: last reached PostgreSQL {said}")
            sys.exit(1)
        self.stdout.write(f"{heartbeat_file.read_text().strip()}: {age:.1f} s ago")
