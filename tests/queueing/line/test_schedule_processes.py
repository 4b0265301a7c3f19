"""A line's revocation killed midway, in a process of its own: what it committed stands, and
the next run goes on from there without ending anyone twice."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter

import pytest
from django.db import connection
from django.utils import timezone

from queueing.hot import keys
from queueing.line.index_sync import hot_index_rebuild
from queueing.line.schedule import line_revoke_closed
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_chain_verify
from staff.services import event_close
from tests.helpers import waiting_entries
from tests.processes import ROOT, process_env, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

# Two chunks of 50 at a time, a second between rounds: killed while it runs.
REVOKER = """
import sys, time
import django
django.setup()
from django.utils import timezone
from queueing.line.schedule import line_revoke_closed

def slowly():
    time.sleep(1)
    return True

line_revoke_closed(event_id=int(sys.argv[1]), now=timezone.now(), go_on=slowly)
"""


def _revoked(event) -> int:
    return QueueEntry.objects.filter(event=event, status="revoked").count()


def _no_other_transaction() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
        )
        return cursor.fetchone()[0] == 0


def test_a_revocation_killed_between_chunks_goes_on_without_duplicates(
    make_event, redis_client
) -> None:
    event = make_event(capacity=0, rate_per_minute=0, heartbeat_seconds=3600)
    waiting_entries(event, event.tiers.get(), 400)
    assert hot_index_rebuild(event_id=event.id)
    event_close(event=event, actor="staff:x", now=timezone.now())
    revoker = subprocess.Popen(
        [sys.executable, "-c", REVOKER, str(event.id)],
        cwd=ROOT,
        env=process_env(WR_LINE_END_CHUNK="50", WR_LINE_END_PARALLEL="2"),
    )
    try:
        wait_until(lambda: _revoked(event) >= 100, timeout=30, what="the first chunks")
    finally:
        revoker.send_signal(signal.SIGKILL)
        revoker.wait()
    wait_until(_no_other_transaction, timeout=10, what="the killed run's transactions to end")
    before = _revoked(event)
    assert 100 <= before < 400
    # Every committed chunk is whole: as many records as fans revoked.
    assert AuditRecord.objects.filter(event=event, action="revoked").count() == before
    assert audit_chain_verify(event_id=event.id).ok
    queue = keys.tier_queue(event.id, event.tiers.get().id)
    assert redis_client.zcard(queue) == 400  # dropped only once the line has ended

    assert line_revoke_closed(event_id=event.id, now=timezone.now()) == 400 - before
    assert _revoked(event) == 400
    tickets = Counter(
        AuditRecord.objects.filter(event=event, action="revoked").values_list(
            "ticket_id", flat=True
        )
    )
    assert len(tickets) == 400 and set(tickets.values()) == {1}
    verdict = audit_chain_verify(event_id=event.id)
    assert verdict.ok and verdict.complete
    assert not redis_client.exists(queue)
