"""The line's schedule: starting it at ``starts_at`` (with the verifiable shuffle of the
pre-queue), or with the on-sale when nothing is scheduled, and emptying it when the on-sale
closes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction

from events.models import Event, EventState, QueueOrder
from queueing.line.index_sync import (
    hot_index_rebuild,
    index_add,
    index_forget,
    index_line_drop,
)
from queueing.line.reads import event_layout
from queueing.models import AuditAction, LineWatch, QueueEntry
from queueing.records.audit import audit_append, audit_chains_lock
from queueing.records.bulk_ends import entries_end_all
from queueing.records.transitions import Moved, transition_audited
from queueing.rules.shuffle import shuffled_order
from queueing.rules.states import QUEUED, EntryStatus
from queueing.webhooks.emitting import webhook_emit

logger = logging.getLogger(__name__)

SHUFFLE_ALGORITHM = 'ticket ids sorted by sha256(seed + ":" + ticket_id) hex digest'


def _reorder_and_open(order: list[tuple[int, int]], now: datetime) -> None:
    """Give each (entry id, order key) pair its key and make it waiting, in one statement."""
    ids = [entry_id for entry_id, _ in order]
    keys = [key for _, key in order]
    table = QueueEntry._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS e SET order_key = v.order_key, status = %s, "
            "status_changed_at = %s "
            "FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, order_key) "
            "WHERE e.id = v.id AND e.status = %s",
            [EntryStatus.WAITING.value, now, ids, keys, EntryStatus.PREQUEUE.value],
        )
        if cursor.rowcount != len(ids):
            raise RuntimeError("pre-queue changed during the shuffle")


def line_start(*, event_id: int, now: datetime, only_without_prequeue: bool = False) -> bool:
    """At the start: shuffle the pre-queue (or keep join order) and open the line.
    Idempotent; True if this call started the line. The tick calls it, and so do the
    on-sale's creation and a join that finds the start due before any tick did
    (``only_without_prequeue``: only when nobody is in the pre-queue, see joining.py)."""
    if only_without_prequeue and _prequeue_exists(event_id):
        return False  # asked without a lock first: the cheap answer in the common case
    with transaction.atomic():
        event = Event.objects.select_for_update(no_key=True).filter(pk=event_id).first()
        if event is None or event.started_at is not None:
            return False
        if event.state_at(now) not in (EventState.OPEN, EventState.PAUSED):
            return False
        # The chain heads' locks first (every lane's, then the root's): joins take their
        # chain's before deciding "pre-queue or waiting", so every join either committed
        # before this point (and is in the cohort) or waits and then sees the line started.
        # Nobody falls between the two.
        audit_chains_lock(event_id=event_id)
        if only_without_prequeue and _prequeue_exists(event_id):
            return False  # a join committed to the pre-queue meanwhile
        # Lock the cohort so a fan leaving at this instant waits for the shuffle to finish.
        cohort = list(
            QueueEntry.objects.select_for_update()
            .filter(event_id=event_id, status=EntryStatus.PREQUEUE)
            .order_by("order_key")
            .values_list("id", "public_id", "order_key")
        )
        keys_in_join_order = [key for _, _, key in cohort]
        if event.shuffle_at_start:
            by_ticket = {str(public_id): entry_id for entry_id, public_id, _ in cohort}
            ids = [by_ticket[t] for t in shuffled_order(event.shuffle_seed, by_ticket)]
        else:
            ids = [entry_id for entry_id, _, _ in cohort]
        if ids:
            _reorder_and_open(list(zip(ids, keys_in_join_order, strict=True)), now)
        Event.objects.filter(pk=event_id).update(started_at=now)
        audit_append(
            event_id=event_id,
            action=AuditAction.SHUFFLED,
            actor="system:schedule",
            at=now,
            data={
                "shuffled": event.shuffle_at_start,
                "cohort": len(ids),
                # A random line's seed orders everyone who joins later too: kept secret
                # until the on-sale ends (the on-sale's API reveals it then).
                "seed": None if event.queue_order == QueueOrder.RANDOM else event.shuffle_seed,
                "queue_order": event.queue_order,
                "seed_sha256": event.shuffle_seed_sha256,
                "algorithm": SHUFFLE_ALGORITHM,
                "order_keys": "the cohort's own keys, ascending, handed out in that order",
            },
        )
        if only_without_prequeue:
            # A fan's join started it: told by the next tick (line/line_watch.py), not here.
            LineWatch.objects.update_or_create(
                event_id=event_id,
                defaults={"start_told": False},
                create_defaults={"start_told": False, "seen_at": now},
            )
        else:
            webhook_emit(
                event=event, type="onsale.started", now=now, data=started_data(event, len(ids))
            )
    if ids:
        # Every cohort member moves from the pre-queue to its tier: reload the index.
        Event.objects.filter(pk=event_id).update(hot_index_dirty=True)
        hot_index_rebuild(event_id=event_id, now=now)
    return True


def started_data(event: Event, cohort: int) -> dict[str, object]:
    """``onsale.started``'s data: how many the pre-queue let go, and whether shuffled."""
    return {"prequeue": cohort, "shuffled": event.shuffle_at_start}


def _prequeue_exists(event_id: int) -> bool:
    return QueueEntry.objects.filter(event_id=event_id, status=EntryStatus.PREQUEUE).exists()


def line_admit_stragglers(*, event_id: int, now: datetime) -> int:
    """Fans whose join was decided in the pre-queue but committed after the start: they
    queue behind, in join order, with the keys they already have."""
    ids = list(
        QueueEntry.objects.filter(event_id=event_id, status=EntryStatus.PREQUEUE).values_list(
            "id", flat=True
        )[:1000]
    )
    if not ids:
        return 0
    moved = transition_audited(
        event_id=event_id,
        ids=ids,
        to=EntryStatus.WAITING,
        expected=[EntryStatus.PREQUEUE],
        now=now,
        action=AuditAction.SHUFFLED,
        actor="system:schedule",
        data=lambda m: {"late_arrival": True, "order_key": m.order_key},
    )
    _index_move_to_tiers(event_id, moved, now)
    return len(moved)


def _index_move_to_tiers(event_id: int, moved: list[Moved], now: datetime) -> None:
    """From the pre-queue list to their tiers' lists, with the keys they have."""
    layout = event_layout(event_id)
    if layout is None or not index_forget(event_id, moved):
        return
    index_add(
        layout, moved, add="tier", heartbeat_deadline=now.timestamp() + layout.heartbeat_seconds
    )


def _always() -> bool:
    return True


def line_revoke_closed(
    *,
    event_id: int,
    now: datetime,
    go_on: Callable[[], bool] = _always,
    reason: str = "closed",
) -> int:
    """After close or ``ends_at``, fans still in line end as revoked, each record with the
    ``reason`` (``closed``, or ``sold_out`` when the shop said the stock is gone): in bulk,
    a chunk of ``WR_LINE_END_CHUNK`` a transaction (each with its records), ``WR_LINE_END_PARALLEL``
    chunks at a time, until nobody is left or ``go_on()`` says stop (the tick's time is up;
    the next tick goes on). Once nobody is left the hot index drops the whole line. Pages
    learn of the close from the tick (its ``state``), not one message per fan."""
    ended, none_left = entries_end_all(
        event_id=event_id,
        to=EntryStatus.REVOKED,
        expected=QUEUED,
        now=now,
        action=AuditAction.REVOKED,
        actor="system:schedule",
        data=lambda previous: {"reason": reason, "from": previous},
        limit=settings.WR_LINE_END_CHUNK,
        parallel=settings.WR_LINE_END_PARALLEL,
        go_on=go_on,
    )
    if not none_left:
        # Stopped after a full chunk: it may have been the last one, and an on-sale with
        # nobody left in the room gets no further tick to find out.
        none_left = not QueueEntry.objects.filter(event_id=event_id, status__in=QUEUED).exists()
    if none_left:
        # Also when this tick revoked nobody: a run killed after its last chunk committed
        # left the index to drop. One call for an empty line.
        index_line_drop(event_id)
    return len(ended)
