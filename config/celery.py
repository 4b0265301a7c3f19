"""The Celery app; the beat schedule lives in settings (CELERY_BEAT_SCHEDULE)."""

import os
from typing import Any

from celery import Celery
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("waitingroom")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def connections_between_tasks(**_: Any) -> None:
    """Around each task, what Django does around a request: the connection goes back to the
    pool (which keeps it open: no new PostgreSQL connection per tick), or is closed if it
    broke. The fix-up no longer closes them (settings: CELERY_DB_REUSE_MAX)."""
    close_old_connections()
