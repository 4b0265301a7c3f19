"""Waiting fans written straight into PostgreSQL with one COPY, for the benchmark's lines
(the join path is measured on its own)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable


def copy_waiting(fans: Iterable[tuple[int, int, str]]) -> None:
    """One waiting entry per ``(event id, tier id, identity)``, all joined now."""
    from django.db import connection
    from django.utils import timezone

    now = timezone.now().isoformat()
    with connection.cursor() as cursor:
        with cursor.connection.cursor().copy(
            "COPY queueing_queueentry (public_id, event_id, tier_id, identity, status, "
            "joined_at, status_changed_at) FROM STDIN"
        ) as copy:
            for event_id, tier_id, identity in fans:
                copy.write_row((uuid.uuid4(), event_id, tier_id, identity, "waiting", now, now))
