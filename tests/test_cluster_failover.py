"""A Redis Cluster master killed in the middle of an on-sale: its replica takes over, no
acknowledged join is lost, nobody is admitted twice, and positions come back by themselves.

Runs in the cluster pass of `make test` (scripts/redis_cluster.py sets REDIS_CLUSTER and
WR_REDIS_CLUSTER_DIR), against the real processes with Celery on RabbitMQ.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings

from queueing.hot import epoch, keys
from queueing.hot.client import client
from queueing.hot.line_index import IndexState
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit import audit_chain_verify
from queueing.rules.ticket_codec import ticket_read
from scripts.redis_cluster import start_node
from tests.http import request
from tests.processes import running_stack, wait_until

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.REDIS_CLUSTER or "WR_REDIS_CLUSTER_DIR" not in os.environ,
        reason="runs in the Redis Cluster pass of `make test` (scripts/redis_cluster.py)",
    ),
]


def _master_port_of(key: str) -> int:
    return int(client().get_node_from_key(key).port)


class JoinStream:
    """Fans joining one after another in the background; keeps every acknowledged ticket."""

    def __init__(self, base: str, slug: str) -> None:
        self.base, self.slug = base, slug
        self.acknowledged: list[str] = []
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                reply = request("POST", f"{self.base}/api/v1/events/{self.slug}/join", {})
            except OSError:
                self.refused += 1
                continue
            if reply.status in (200, 201):
                self.acknowledged.append(reply.body["ticket"])
            else:
                self.refused += 1
            time.sleep(0.03)

    def __enter__(self) -> JoinStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_a_master_killed_mid_sale_fails_over_and_loses_nothing(make_event) -> None:
    cluster_dir = Path(os.environ["WR_REDIS_CLUSTER_DIR"])
    event = make_event(slug="failover", capacity=5, rate_per_minute=0, heartbeat_seconds=600)
    epoch_key = keys.epoch(event.id)
    port = _master_port_of(epoch_key)
    try:
        with running_stack() as stack:
            base = stack.web()
            stack.worker()
            stack.beat()
            with JoinStream(base, event.slug) as fans:
                wait_until(lambda: len(fans.acknowledged) >= 30, timeout=20, what="joins")
                os.kill(int((cluster_dir / f"{port}.pid").read_text()), signal.SIGKILL)
                killed_at = time.monotonic()
                # Joins go on through the failover (PostgreSQL first; the index catches up).
                wait_until(
                    lambda: _master_port_of_fresh(epoch_key) != port,
                    timeout=20,
                    what="the replica to take over",
                )
                time.sleep(2)
            joined = list(fans.acknowledged)
            assert len(joined) >= 40

            def positions_exact() -> bool:
                # The shop full first: on a loaded machine the worker may let the fifth fan in
                # only now, which would move everyone's place between two polls below.
                if QueueEntry.objects.filter(event=event, status="admitted").count() < 5:
                    return False
                if epoch.epoch_states([event.id])[event.id] is not IndexState.READY:
                    return False
                waiting = QueueEntry.objects.filter(event=event, status="waiting").count()
                counts = client().zcard(keys.tier_queue(event.id, event.tiers.get().id))
                return counts == waiting

            wait_until(positions_exact, timeout=20, what="the index to be rebuilt")
            recovered_in = time.monotonic() - killed_at
            by_ticket = {t: request("GET", f"{base}/api/v1/tickets/{t}").body for t in joined}

        # No acknowledged join lost: every ticket handed out has its entry, and answers.
        entries = set(QueueEntry.objects.filter(event=event).values_list("id", flat=True))
        assert {ticket_read(t).entry_id for t in joined} <= entries
        assert all(body.get("status") for body in by_ticket.values()), by_ticket
        # Positions are the line's order in PostgreSQL.
        waiting = list(
            QueueEntry.objects.filter(event=event, status="waiting")
            .order_by("order_key")
            .values_list("public_id", flat=True)
        )
        polled = sorted(
            body["position"] for body in by_ticket.values() if body["status"] == "waiting"
        )
        assert polled == list(range(1, len(waiting) + 1))
        # Nobody admitted twice, never over capacity, the audit chain whole.
        admitted = list(
            AuditRecord.objects.filter(event=event, action="admitted").values_list(
                "ticket_id", flat=True
            )
        )
        assert len(admitted) == len(set(admitted)) == 5
        assert audit_chain_verify(event_id=event.id).ok
        assert recovered_in <= 15, recovered_in
    finally:
        # The killed node comes back as a replica of its successor, for the tests after this.
        start_node(cluster_dir, port)


def _master_port_of_fresh(key: str) -> int:
    """The slot's master as the cluster sees it now (the client refreshes its map)."""
    try:
        client().get(key)
    except redis.RedisError:
        pass  # the failed call is what makes the client look again
    return _master_port_of(key)
