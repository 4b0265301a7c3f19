"""Celery tasks: take ids, call one service, safe to run twice."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from queueing import ticks
from queueing.line import rebuild
from queueing.line.admission import admission_run


@shared_task(ignore_result=True)
def room_tick() -> None:
    ticks.room_tick(clock=timezone.now)


@shared_task(ignore_result=True)
def admission_for_event(event_id: int) -> None:
    """Run at once when a slot frees, instead of waiting for the next tick."""
    admission_run(event_id=event_id, now=timezone.now())


@shared_task(ignore_result=True)
def hot_index_maintain() -> list[int]:
    return rebuild.hot_index_maintain()


@shared_task(ignore_result=True)
def hot_index_rebuild(event_id: int) -> bool:
    return rebuild.hot_index_rebuild(event_id=event_id)
