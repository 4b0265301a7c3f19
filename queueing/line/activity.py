"""Which on-sales have something to do this second, found for the whole room at once.

The room's per-second cost must follow the busy on-sales, not the configured ones: an idle,
scheduled or ended on-sale costs nothing here beyond its share of two small queries.

- **Fans in the room** (pre-queue, waiting or in the shop): a loose index scan ("skip scan")
  over the partial unique index ``one_live_entry_per_identity``, which holds live entries
  only and leads with the event. Each step jumps to the next event id that has a live entry,
  so the query costs one index probe per busy on-sale, however long its line and however
  much history the ended ones keep.
- **A start that is due**: an on-sale whose start has come but whose line has not started
  (the pre-queue shuffle, or ``started_at`` for an empty line). Schedule moments with nobody
  in the room need nothing else: the join page refreshes itself until the pre-queue opens,
  and an on-sale whose end passes with nobody in it has nobody to send away.
- **A line last seen with fans in it** (``LineWatch``): its tick tells the webhooks when the
  line empties (line/line_watch.py), so it goes on until it has seen the line empty, also
  once the last fan left with nobody in the shop. Asked in the same query as the starts.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.db.models import Q

from events.models import Event, EventControl
from queueing.models import QueueEntry
from queueing.rules.states import LIVE

_LIVE_STATUSES = tuple(status.value for status in LIVE)


def _skip_scan_sql() -> str:
    table = QueueEntry._meta.db_table
    # The status list repeats the index predicate word for word, so the planner may use it.
    statuses = ", ".join(["%s"] * len(_LIVE_STATUSES))
    return f"""
        WITH RECURSIVE live(event_id) AS (
            (SELECT event_id FROM {table} WHERE status IN ({statuses})
             ORDER BY event_id LIMIT 1)
            UNION ALL
            SELECT (SELECT e.event_id FROM {table} e
                    WHERE e.status IN ({statuses}) AND e.event_id > live.event_id
                    ORDER BY e.event_id LIMIT 1)
            FROM live WHERE live.event_id IS NOT NULL
        )
        SELECT event_id FROM live WHERE event_id IS NOT NULL
    """


def events_with_fans() -> list[int]:
    """Ids of the on-sales with anyone in the pre-queue, the line or the shop, ascending."""
    with connection.cursor() as cursor:
        cursor.execute(_skip_scan_sql(), [*_LIVE_STATUSES, *_LIVE_STATUSES])
        return [row[0] for row in cursor.fetchall()]


def _start_due(now: datetime) -> Q:
    return (
        Q(started_at__isnull=True)
        & ~Q(control=EventControl.CLOSED)
        & (Q(ends_at__isnull=True) | Q(ends_at__gt=now))
        & (Q(starts_at__isnull=True) | Q(starts_at__lte=now))
        & (Q(prequeue_opens_at__isnull=True) | Q(prequeue_opens_at__lte=now))
    )


def events_due_to_start(now: datetime) -> list[int]:
    """On-sales whose start has come (running or paused) but whose line has not started."""
    return list(Event.objects.filter(_start_due(now)).values_list("id", flat=True))


def events_with_work(now: datetime) -> list[int]:
    # Besides a start due, a line the tick last saw with fans in it ticks until the tick sees
    # it empty, even once nobody is left in the room (line/line_watch.py): in the same query.
    due = Event.objects.filter(_start_due(now) | Q(line_watch__in_line=True))
    return sorted(set(events_with_fans()) | set(due.values_list("id", flat=True)))
