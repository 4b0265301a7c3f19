"""Admission with Celery on RabbitMQ, the production broker: gunicorn + uvicorn, a worker and
the beat, fans joining over HTTP. With the broker apart from Redis, admission goes on while the
hot-index Redis is gone."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.utils import timezone
from kombu import Connection, Exchange, Queue

from queueing.models import QueueEntry
from staff.services import event_update
from tests.brokers import AMQP_URL, amqp_queue_delete, amqp_queue_depth, amqp_require
from tests.faults import RedisServer
from tests.http import fan_joins, ticket_complete, ticket_status
from tests.processes import celery_queue, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def rabbitmq() -> Iterator[dict[str, str]]:
    """The processes' broker: RabbitMQ, on this test's own queue, deleted afterwards."""
    amqp_require()
    queue = celery_queue()
    try:
        yield {"CELERY_BROKER_URL": AMQP_URL}
    finally:
        amqp_queue_delete(queue)


def admitted(event) -> int:
    return QueueEntry.objects.filter(event=event, status="admitted").count()


def test_fans_are_admitted_with_celery_on_rabbitmq(make_event, rabbitmq) -> None:
    event = make_event(slug="amqp", capacity=3, rate_per_minute=0, heartbeat_seconds=600)
    with running_stack(**rabbitmq) as stack:
        base = stack.web()
        tickets = [fan_joins(base, "amqp")["ticket"] for _ in range(6)]

        # The beat alone for a while: its messages expire on the broker (their `expires` is
        # RabbitMQ's time to live), so a worker that starts late finds no backlog.
        stack.beat()
        wait_until(lambda: amqp_queue_depth(celery_queue()), timeout=15, what="beat messages")
        # Past the hourly jobs' time to live (settings.WR_MAINTENANCE_EXPIRES): sent first,
        # they head the queue, and RabbitMQ drops an expired message only at its head.
        time.sleep(settings.WR_MAINTENANCE_EXPIRES + 3)
        # Kept, they would be 20 or more by now (a room tick a second, a check every 2 s, a
        # webhook sweep every 5 s, the hourly jobs). Dropped as they expire, at most what was
        # sent while the longest-lived of them waits at the head: a sweep's 5 s, so 5 ticks,
        # 3 checks and the sweep, one more where two fall in the same second.
        assert amqp_queue_depth(celery_queue()) <= 10

        stack.worker()
        wait_until(lambda: admitted(event) == 3, timeout=20, what="the first admissions")
        assert f"Connected to {Connection(AMQP_URL).as_uri()}" in stack.log("worker")
        first = [ticket_status(base, t) for t in tickets[:3]]
        assert [s["status"] for s in first] == ["admitted"] * 3
        assert all(s["pass"] and s["redirect_url"] for s in first)
        assert [ticket_status(base, t)["position"] for t in tickets[3:]] == [1, 2, 3]

        # A completion asks a worker, through RabbitMQ, to admit the next fan at once.
        completed_at = time.monotonic()
        ticket_complete(base, event, tickets[0])
        wait_until(
            lambda: ticket_status(base, tickets[3])["status"] == "admitted",
            timeout=5,
            what="the next fan to be let in",
        )
        assert time.monotonic() - completed_at < 5
        assert admitted(event) == 3


def test_admission_goes_on_while_the_hot_index_redis_is_gone(
    make_event, rabbitmq, tmp_path
) -> None:
    # Everything Redis is this private server (hot index, cache, channel layer: a room with
    # one Redis); the broker is RabbitMQ. Killing it leaves PostgreSQL and the broker.
    hot = RedisServer(tmp_path)
    hot.start()
    event = make_event(slug="nored", capacity=2, rate_per_minute=0, heartbeat_seconds=600)
    try:
        with running_stack(REDIS_URL=hot.url, CHANNELS_REDIS_URL=hot.url, **rabbitmq) as stack:
            base = stack.web()
            stack.worker()
            stack.beat()
            tickets = [fan_joins(base, "nored")["ticket"] for _ in range(8)]
            wait_until(lambda: admitted(event) == 2, timeout=20, what="the first admissions")

            hot.kill()
            # Statuses and joins answer from PostgreSQL.
            assert [ticket_status(base, t)["position"] for t in tickets[2:]] == [1, 2, 3, 4, 5, 6]
            late = [fan_joins(base, "nored") for _ in range(2)]
            assert [body["position"] for body in late] == [7, 8]

            # A freed slot is filled at once: the completion's message goes through RabbitMQ.
            ticket_complete(base, event, tickets[0])
            wait_until(
                lambda: ticket_status(base, tickets[2])["status"] == "admitted",
                timeout=10,
                what="admission after a completion without Redis",
            )
            # The beat's ticks admit too: more room in the shop, the next two in line go in.
            event_update(event=event, actor="test", now=timezone.now(), changes={"capacity": 4})
            wait_until(lambda: admitted(event) == 4, timeout=10, what="admission by the ticks")
            after = [ticket_status(base, t) for t in tickets[2:5]]
            assert [s["status"] for s in after] == ["admitted"] * 3
            assert all(s["pass"] for s in after)
            assert [ticket_status(base, t)["position"] for t in tickets[5:]] == [1, 2, 3]
            assert [ticket_status(base, body["ticket"])["position"] for body in late] == [4, 5]
            assert QueueEntry.objects.filter(event=event).count() == 10
    finally:
        hot.kill()


def test_a_test_queue_is_deleted_from_rabbitmq_afterwards(settings) -> None:
    amqp_require()
    queue = f"{settings.WR_REDIS_PREFIX}:probe"
    with Connection(AMQP_URL) as conn:
        Queue(queue, Exchange(queue), queue)(conn.default_channel).declare()
    assert amqp_queue_depth(queue) == 0
    amqp_queue_delete(queue)
    assert amqp_queue_depth(queue) is None
