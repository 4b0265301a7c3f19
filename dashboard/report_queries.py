"""The report's figures, computed in PostgreSQL: aggregates over an on-sale's entries, so that a
page costs a handful of queries whether a hundred fans came or a million, and only small
results (a row per tier, a row per time bucket or wait bin) reach Python.

Each entry's wait is from its join to its *first* admission, as in the JSON report
(dashboard/reports.py): a fan who went back in line (``reentered_at``) has their entry's
``admitted_at`` replaced by the second admission (or cleared while they wait again), so
their first comes from the audit trail; those are few (a re-entry is once per entry) and
found through the trail's ticket index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from dashboard.report_scales import Timeline
from queueing.models import AuditAction, AuditRecord, QueueEntry
from queueing.rules.states import QUEUED, EntryStatus

_ENTRY = QueueEntry._meta.db_table
_AUDIT = AuditRecord._meta.db_table

# One row per entry of the on-sale, with its first admission and its wait (seconds).
_WAITS = f"""
WITH first AS (
  SELECT q.tier_id, q.status, q.joined_at, q.admitted_at, q.ended_at, q.reentered_at,
         q.quoted_p10, q.quoted_p50, q.quoted_p90,
         CASE WHEN q.reentered_at IS NULL THEN q.admitted_at
              ELSE COALESCE(
                (SELECT min(a.at) FROM {_AUDIT} a
                  WHERE a.ticket_id = q.public_id AND a.event_id = q.event_id
                    AND a.action = '{AuditAction.ADMITTED.value}'),
                q.admitted_at)
         END AS first_admitted_at
    FROM {_ENTRY} q
   WHERE q.event_id = %(event_id)s
), e AS (
  SELECT *, extract(epoch FROM first_admitted_at - joined_at)::float8 AS wait_s FROM first
)
"""

_S = EntryStatus
_QUEUED = ", ".join(f"'{s.value}'" for s in QUEUED)

_SUMMARY = (
    _WAITS
    + f"""
SELECT tier_id, GROUPING(tier_id) = 1 AS all_tiers,
       count(*) AS joined,
       count(wait_s) AS admitted,
       count(*) FILTER (WHERE status IN ({_QUEUED})) AS still_waiting,
       count(*) FILTER (WHERE wait_s IS NULL AND status = '{_S.LEFT.value}') AS left_line,
       count(*) FILTER (WHERE wait_s IS NULL AND status = '{_S.EXPIRED.value}') AS expired_line,
       count(*) FILTER (WHERE wait_s IS NULL AND status = '{_S.REVOKED.value}') AS revoked_line,
       count(*) FILTER (WHERE status = '{_S.ABANDONED.value}') AS abandoned_sessions,
       count(*) FILTER (WHERE wait_s IS NOT NULL AND status = '{_S.EXPIRED.value}')
         AS expired_sessions,
       count(*) FILTER (WHERE status = '{_S.COMPLETED.value}') AS completed,
       count(reentered_at) AS reentered,
       percentile_disc(ARRAY[0.1, 0.5, 0.9]) WITHIN GROUP (ORDER BY wait_s) AS wait_pcts,
       max(wait_s) AS wait_max,
       count(*) FILTER (WHERE wait_s IS NOT NULL AND quoted_p10 IS NOT NULL
                          AND quoted_p90 IS NOT NULL) AS quoted,
       count(*) FILTER (WHERE wait_s BETWEEN quoted_p10 AND quoted_p90) AS inside_quote,
       count(*) FILTER (WHERE wait_s < quoted_p10) AS under_quote,
       count(*) FILTER (WHERE wait_s > quoted_p90) AS over_quote,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(wait_s - quoted_p50))
         AS median_abs_error,
       min(joined_at) AS first_at,
       max(GREATEST(joined_at, first_admitted_at, admitted_at, ended_at, reentered_at))
         AS last_at
  FROM e
 GROUP BY GROUPING SETS ((tier_id), ())
"""
)

# Moves in and out of the line, binned: +1 at a join and at a re-entry; -1 at the first
# admission, at the end of a place never admitted (left, expired, revoked), and when a fan
# back in line is admitted again or ends.
_TIMELINE = (
    _WAITS
    + """
, moves AS (
  SELECT joined_at AS at, 1 AS arrived, 0 AS admitted, 1 AS delta FROM e
  UNION ALL
  SELECT first_admitted_at, 0, 1, -1 FROM e WHERE first_admitted_at IS NOT NULL
  UNION ALL
  SELECT ended_at, 0, 0, -1 FROM e WHERE first_admitted_at IS NULL AND ended_at IS NOT NULL
  UNION ALL
  SELECT reentered_at, 0, 0, 1 FROM e WHERE reentered_at IS NOT NULL
  UNION ALL
  SELECT COALESCE(admitted_at, ended_at), 0, 0, -1 FROM e
   WHERE reentered_at IS NOT NULL AND COALESCE(admitted_at, ended_at) IS NOT NULL
)
SELECT GREATEST(0, LEAST(%(last)s,
         floor(extract(epoch FROM at - %(origin)s) / %(seconds)s)::int)) AS bucket,
       sum(arrived), sum(admitted), sum(delta)
  FROM moves
 GROUP BY 1
"""
)

_HISTOGRAM = (
    _WAITS
    + """
SELECT tier_id, GREATEST(0, LEAST(%(last)s, floor(wait_s / %(width)s)::int)) AS bin, count(*)
  FROM e
 WHERE wait_s IS NOT NULL
 GROUP BY 1, 2
"""
)


@dataclass(frozen=True)
class Summary:
    """The figures of one tier, or of all (``tier_id`` None)."""

    tier_id: int | None
    joined: int
    admitted: int
    still_waiting: int
    left_line: int
    expired_line: int
    revoked_line: int
    abandoned_sessions: int
    expired_sessions: int
    completed: int
    reentered: int
    wait_p10: float | None
    wait_p50: float | None
    wait_p90: float | None
    wait_max: float | None
    quoted: int
    inside_quote: int
    under_quote: int
    over_quote: int
    median_abs_error: float | None
    first_at: datetime | None
    last_at: datetime | None


def _fetch(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def summaries(event_id: int) -> list[Summary]:
    """All tiers first (always there, zeros for an on-sale nobody joined), then each tier that
    had entries."""
    rows = []
    for row in _fetch(_SUMMARY, {"event_id": event_id}):
        tier_id, all_tiers, *counts = row[:12]
        pcts, wait_max, quoted, inside, under, over, error, first_at, last_at = row[12:]
        p10, p50, p90 = pcts if pcts else (None, None, None)
        rows.append(
            Summary(
                None if all_tiers else tier_id,
                *counts,
                p10,
                p50,
                p90,
                wait_max,
                quoted,
                inside,
                under,
                over,
                error,
                first_at,
                last_at,
            )
        )
    return sorted(rows, key=lambda s: s.tier_id is not None)


@dataclass(frozen=True)
class Bucket:
    arrivals: int
    admissions: int
    waiting: int  # in line at the bucket's end


def buckets(event_id: int, scale: Timeline) -> list[Bucket]:
    rows = _fetch(
        _TIMELINE,
        {
            "event_id": event_id,
            "origin": scale.origin,
            "seconds": scale.seconds,
            "last": scale.count - 1,
        },
    )
    by_index = {index: (arrived, admitted, delta) for index, arrived, admitted, delta in rows}
    result, line = [], 0
    for index in range(scale.count):
        arrived, admitted, delta = by_index.get(index, (0, 0, 0))
        line += delta
        result.append(Bucket(arrivals=arrived, admissions=admitted, waiting=max(0, line)))
    return result


def wait_histogram(event_id: int, *, width: int, bins: int) -> dict[int, list[int]]:
    """Fans admitted per wait bin of ``width`` seconds, by tier id (the last bin takes the
    rest)."""
    counts: dict[int, list[int]] = {}
    rows = _fetch(_HISTOGRAM, {"event_id": event_id, "width": width, "last": bins - 1})
    for tier_id, index, n in rows:
        counts.setdefault(tier_id, [0] * bins)[index] = n
    return counts
