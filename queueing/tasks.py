"""Celery tasks: take ids, call one service, safe to run twice."""

from __future__ import annotations

import smtplib
from typing import Any

from celery import shared_task
from celery.signals import task_revoked
from django.conf import settings
from django.utils import timezone

from queueing import beat
from queueing.hot import stats
from queueing.line import index_sync
from queueing.line.admission import admission_run
from queueing.line.draw import draws_run as draws
from queueing.line.outcome_mails import OutcomeMailsFailed
from queueing.line.outcome_mails import registration_mails_send as registration_mails
from queueing.line.registration import registration_mail_send as registration_mail
from queueing.line.retention import retention_run as retention
from queueing.line.turn_mail import turn_mail_send
from queueing.live.ticks import broadcast_tick
from queueing.webhooks import delivering


@shared_task(ignore_result=True)
def room_tick() -> int:
    """The beat's once-a-second task: one tick sent per on-sale with work."""
    return len(
        beat.room_dispatch(
            now=timezone.now(), send=_send_event_tick, claim_seconds=settings.WR_TICK_STALE_SECONDS
        )
    )


def _send_event_tick(event_id: int, claim: str) -> None:
    # A tick not started within WR_TICK_STALE_SECONDS is dropped by the worker that receives
    # it: a newer one has been sent meanwhile (its claim expired at the same moment).
    event_tick.apply_async(args=[event_id, claim], expires=settings.WR_TICK_STALE_SECONDS)


@shared_task(ignore_result=True)
def event_tick(event_id: int, claim: str = "") -> None:
    """One on-sale's tick: schedule, expiry, admission, live broadcast."""
    beat.event_beat(event_id=event_id, now=timezone.now(), claim=claim)


EVENT_TICK_TASK = "queueing.tasks.event_tick"


@task_revoked.connect
def tick_dropped_counted(
    sender: Any = None, request: Any = None, expired: bool = False, **_: Any
) -> None:
    """A worker that receives a tick past its ``expires`` drops it unrun: counted for
    waitingroom_ticks_dropped_total. (On RabbitMQ the broker itself drops most stale ticks
    unseen, the message's time to live: those are never counted here.)"""
    if expired and getattr(sender, "name", None) == EVENT_TICK_TASK:
        stats.room_counter_add(stats.TICKS_DROPPED)


@shared_task(ignore_result=True)
def admission_for_event(event_id: int) -> None:
    """Run at once when a slot frees, instead of waiting for the next tick."""
    admission_run(event_id=event_id, now=timezone.now())


@shared_task(ignore_result=True)
def broadcast_for_event(event_id: int) -> None:
    """A tick for the event's pages at once: staff changed its message or mode."""
    broadcast_tick(event_id=event_id, now=timezone.now())


@shared_task(ignore_result=True)
def turn_mails_send(entry_ids: list[int]) -> int:
    """'It's your turn' mails for fans just let in who left an address (sent at most once)."""
    return turn_mail_send(entry_ids=entry_ids, now=timezone.now())


# SMTP refusing or away is transient: tried again with backoff, a few times. The claim is
# released on failure, so a retry sends the link, and a success is never sent twice.
@shared_task(
    ignore_result=True,
    autoretry_for=(OSError, smtplib.SMTPException),
    retry_backoff=30,
    max_retries=5,
)
def registration_mail_send(registration_id: str) -> bool:
    """A new e-mail registration's confirmation link."""
    return registration_mail(registration_id=registration_id, now=timezone.now())


# Mails the SMTP server did not take are released by the run and retried with backoff; the
# ones it took are never sent again (line/outcome_mails.py).
@shared_task(
    ignore_result=True,
    autoretry_for=(OutcomeMailsFailed, OSError, smtplib.SMTPException),
    retry_backoff=30,
    max_retries=8,
)
def registration_mails_send(event_id: int) -> int:
    """What a draw (or a lapse) decided, told to each registrant by address once."""
    return registration_mails(event_id=event_id, now=timezone.now())


@shared_task(ignore_result=True)
def draws_run() -> list[int]:
    """The registration windows closed and not drawn yet: frozen and drawn, each once."""
    return draws(now=timezone.now())


@shared_task(ignore_result=True)
def hot_index_maintain() -> list[int]:
    return index_sync.hot_index_maintain()


@shared_task(ignore_result=True)
def hot_index_rebuild(event_id: int) -> bool:
    return index_sync.hot_index_rebuild(event_id=event_id)


@shared_task(ignore_result=True)
def retention_run() -> dict[str, object]:
    """Hourly: ended on-sales past WR_RETENTION_DAYS archived (a few a run), expired place
    links and address digests past their use purged (queueing/line/retention.py)."""
    outcome = retention(now=timezone.now())
    return {
        "archived": outcome.archived,
        "refused": outcome.refused,
        "place_links": outcome.place_links,
        "address_digests": outcome.address_digests,
        "registration_addresses": outcome.registration_addresses,
    }


@shared_task(ignore_result=True)
def webhook_deliver(delivery_id: int) -> str | None:
    """One attempt of a webhook delivery, if it is due and nobody else is making one."""
    return delivering.delivery_attempt(delivery_id=delivery_id, now=timezone.now())


@shared_task(ignore_result=True)
def webhooks_sweep() -> int:
    """Every WR_WEBHOOK_SWEEP_SECONDS: an attempt asked for each delivery due (retries)."""
    return len(delivering.deliveries_sweep(now=timezone.now()))
