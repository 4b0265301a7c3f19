"""Heartbeats the hot index could not record: nobody loses their place to a Redis outage.

A poll is a heartbeat, written to Redis. While Redis is away the poll is still answered (from
PostgreSQL), but its heartbeat is lost, and when Redis comes back with its data (a network
cut, a stalled server) every deadline there would be in the past. A process whose connection
pool stays spent (``HotIndexBusy``) loses its heartbeats the same way, though Redis answers
other processes, and is counted the same way. So once a process has
failed to record an on-sale's heartbeats for ``FLAG_AFTER_SECONDS`` without a success in
between, it flags the on-sale's index as stale in PostgreSQL, as a write missed after a
commit does (``index_sync.mark_index_dirty``):

- expiry waits while the flag is up (``expiry.queued_expire_unseen``, and the admission run,
  which counts everyone as seen), whichever process runs it and whatever Redis it reaches;
- the maintenance task rebuilds the index once Redis answers, and the rebuild gives every
  fan a fresh ``heartbeat_seconds`` from then (``rebuild.hot_index_rebuild``): fans are
  expired only when unseen for a whole heartbeat with heartbeats being recorded again.

A shorter blip flags nothing, and needs not: a fan polls at least three times a heartbeat,
and a poll answered without the hot index asks to come back within half of one
(``rules/polling.py``), so one or two lost heartbeats never leave a fan unseen for a whole
heartbeat. The flag is written at most once per ``FLAG_EVERY_SECONDS`` per process and
on-sale, and only changes a row not flagged yet.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError

from events.models import Event

logger = logging.getLogger(__name__)

FLAG_AFTER_SECONDS = 1.0
FLAG_EVERY_SECONDS = 1.0
_REMEMBERED_MAX = 10_000

_lock = threading.Lock()
# Per on-sale: since when this process has failed to record heartbeats (no success since).
_failing_since: dict[int, float] = {}
_flagged_at: dict[int, float] = {}


def heartbeats_recorded(event_id: int) -> None:
    """A heartbeat of the on-sale was recorded: any run of failures is over. Costs a poll
    nothing while there is none."""
    if _failing_since:
        with _lock:
            _failing_since.pop(event_id, None)


def heartbeats_unrecorded_due(event_id: int, *, now: float | None = None) -> bool:
    """A heartbeat of the on-sale could not be recorded at ``now`` (``time.monotonic()``):
    whether this process should flag the on-sale now (it then counts as flagged)."""
    now = time.monotonic() if now is None else now
    with _lock:
        if len(_failing_since) >= _REMEMBERED_MAX:
            _failing_since.clear()
            _flagged_at.clear()
        since = _failing_since.setdefault(event_id, now)
        if now - since < FLAG_AFTER_SECONDS:
            return False
        last = _flagged_at.get(event_id)
        if last is not None and now - last < FLAG_EVERY_SECONDS:
            return False
        _flagged_at[event_id] = now
        return True


def heartbeats_unrecorded_flag(event_id: int) -> None:
    """Flag the on-sale's index stale (never fails the poll that asks)."""
    try:
        changed = Event.objects.filter(pk=event_id, hot_index_dirty=False).update(
            hot_index_dirty=True
        )
    except DatabaseError:
        logger.warning("could not flag the heartbeats of event %s as unrecorded", event_id)
        return
    if changed:
        logger.warning(
            "heartbeats of event %s could not be recorded; expiry waits for its rebuild",
            event_id,
        )


def heartbeats_unrecorded(event_id: int) -> None:
    """A fan's heartbeat could not be recorded (Redis unreachable)."""
    if heartbeats_unrecorded_due(event_id):
        heartbeats_unrecorded_flag(event_id)


def heartbeat_gaps_clear() -> None:
    with _lock:
        _failing_since.clear()
        _flagged_at.clear()
