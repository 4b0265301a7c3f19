"""The scheduler's lease and its fencing, in PostgreSQL (queueing/scheduler.py runs them).

Every statement reads PostgreSQL's clock (``statement_timestamp()``, one instant per
statement), never the caller's: two scheduler hosts whose clocks disagree still agree on who
leads and until when.

- ``lease_hold`` takes the lease if it is free or run out, or renews it for its holder, in one
  conditional upsert: of two schedulers asking at once, one gets it.
- ``slot_claim`` records that a job's period is being sent, if nobody sent it (or a later
  one) yet and the caller still holds an unexpired lease, in one conditional ``UPDATE``: the
  fence. A scheduler that lost its lease without knowing (paused, cut off) claims nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from queueing.models import SchedulerJob, SchedulerLease

LEASE = SchedulerLease._meta.db_table
JOB = SchedulerJob._meta.db_table


@dataclass(frozen=True)
class LeaseHeld:
    """The lease is the caller's until ``expires_epoch``; ``db_epoch`` is PostgreSQL's clock at
    the renewal (both in seconds since the epoch)."""

    db_epoch: float
    expires_epoch: float
    taken: bool  # True when this call took it over (from nobody or another holder)


@dataclass(frozen=True)
class SchedulerState:
    """What /metrics says of the scheduler: one query."""

    room_tick_age_seconds: float | None  # None until a first tick was sent
    leader_changes: int


def lease_hold(*, name: str, holder: str, seconds: float) -> LeaseHeld | None:
    """Take or renew the lease for ``seconds``; None while another holder's is unexpired."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {LEASE} AS lease (name, holder, expires_at, acquired_at, leader_changes)
            VALUES (%(name)s, %(holder)s, statement_timestamp() + make_interval(secs => %(secs)s),
                    statement_timestamp(), 1)
            ON CONFLICT (name) DO UPDATE SET
                holder = EXCLUDED.holder,
                expires_at = EXCLUDED.expires_at,
                acquired_at = CASE WHEN lease.holder = EXCLUDED.holder
                                   THEN lease.acquired_at ELSE EXCLUDED.acquired_at END,
                leader_changes = lease.leader_changes
                    + CASE WHEN lease.holder = EXCLUDED.holder THEN 0 ELSE 1 END
            WHERE lease.holder = EXCLUDED.holder OR lease.expires_at <= statement_timestamp()
            RETURNING extract(epoch FROM statement_timestamp()), extract(epoch FROM expires_at),
                      acquired_at = statement_timestamp()
            """,
            {"name": name, "holder": holder, "secs": seconds},
        )
        row = cursor.fetchone()
    if row is None:
        return None
    db_epoch, expires_epoch, taken = row
    return LeaseHeld(db_epoch=float(db_epoch), expires_epoch=float(expires_epoch), taken=taken)


def lease_release(*, name: str, holder: str) -> bool:
    """Give the lease up at once (a scheduler stopping): a standby takes it at its next try."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {LEASE} SET expires_at = statement_timestamp() "
            "WHERE name = %s AND holder = %s AND expires_at > statement_timestamp()",
            [name, holder],
        )
        return cursor.rowcount == 1


def jobs_register(jobs: dict[str, str]) -> None:
    """A row per job (name: task) so that claims have something to compare against; a job's
    last slot survives restarts and its task name follows the settings."""
    with connection.cursor() as cursor:
        cursor.executemany(
            f"""
            INSERT INTO {JOB} (name, task, last_slot, sent_by) VALUES (%s, %s, -1, '')
            ON CONFLICT (name) DO UPDATE SET task = EXCLUDED.task
            WHERE {JOB}.task <> EXCLUDED.task
            """,
            list(jobs.items()),
        )


def slot_claim(*, job: str, slot: int, lease: str, holder: str) -> bool:
    """True if the caller may send ``job`` for ``slot`` (and nobody else ever will): the slot is
    later than any sent, and the caller's lease is unexpired, both judged in this one
    statement."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {JOB} SET last_slot = %(slot)s, sent_at = statement_timestamp(),
                sent_by = %(holder)s
            WHERE name = %(job)s AND last_slot < %(slot)s
              AND EXISTS (
                  SELECT 1 FROM {LEASE}
                  WHERE name = %(lease)s AND holder = %(holder)s
                    AND expires_at > statement_timestamp())
            """,
            {"job": job, "slot": slot, "lease": lease, "holder": holder},
        )
        return cursor.rowcount == 1


def scheduler_state(*, lease: str, tick_task: str) -> SchedulerState:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT
              (SELECT extract(epoch FROM statement_timestamp() - max(sent_at)) FROM {JOB}
               WHERE task = %s),
              (SELECT leader_changes FROM {LEASE} WHERE name = %s)
            """,
            [tick_task, lease],
        )
        age, changes = cursor.fetchone()
    return SchedulerState(
        room_tick_age_seconds=float(age) if age is not None else None,
        leader_changes=int(changes or 0),
    )
