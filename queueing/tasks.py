"""Celery tasks: take ids, call one service, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from queueing import services


@shared_task(ignore_result=True)
def hot_index_maintain() -> list[int]:
    return services.hot_index_maintain()


@shared_task(ignore_result=True)
def hot_index_rebuild(event_id: int) -> bool:
    return services.hot_index_rebuild(event_id=event_id)
