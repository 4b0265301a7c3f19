"""RabbitMQ for the tests that run Celery on a real AMQP broker.

A queue Celery declares on RabbitMQ is durable, with a direct exchange of the same name: both
outlive the processes. Tests name their queue after their own key prefix, so each must delete
its queue and exchange afterwards, or the broker collects one pair per test run forever.
"""

from __future__ import annotations

import os

import pytest
from amqp.exceptions import NotFound
from kombu import Connection, Exchange, Queue

# `make test` makes sure a RabbitMQ answers here (scripts/ensure_rabbitmq.sh).
AMQP_URL = os.environ.get("WR_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def _connection(url: str) -> Connection:
    return Connection(url, connect_timeout=5, transport_options={"max_retries": 0})


def amqp_require(url: str = AMQP_URL) -> None:
    """Fail the test at once, saying why, when no RabbitMQ answers."""
    try:
        with _connection(url) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as error:  # noqa: BLE001 - any failure means the same thing here
        pytest.fail(
            f"RabbitMQ is not reachable at {Connection(url).as_uri()} ({error}); "
            "`make test` starts it (scripts/ensure_rabbitmq.sh), or set WR_TEST_AMQP_URL"
        )


def amqp_queue_depth(name: str, url: str = AMQP_URL) -> int | None:
    """Messages ready in the queue, or None when there is no such queue."""
    with _connection(url) as conn:
        try:
            _, count, _ = conn.default_channel.queue_declare(name, passive=True)
        except NotFound:
            return None
        return count


def amqp_queue_delete(name: str, url: str = AMQP_URL) -> None:
    """Delete a queue Celery declared (messages and all) and its exchange."""
    with _connection(url) as conn:
        channel = conn.default_channel
        Queue(name, Exchange(name), name)(channel).delete()
        Exchange(name)(channel).delete()
