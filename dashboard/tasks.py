"""The dashboard's Celery task: staff login lockout records purged past their keeping time
(the queue's own retention is ``queueing.tasks.retention_run``; the layers keep lockouts,
which are the dashboard's, out of it)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from dashboard.login_throttle import login_lockouts_purge as purge


@shared_task(ignore_result=True)
def login_lockouts_purge() -> int:
    return purge(now=timezone.now(), keep_days=settings.WR_LOGIN_LOCKOUT_KEEP_DAYS)
