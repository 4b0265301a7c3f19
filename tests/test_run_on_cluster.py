"""`make run`'s processes (scripts/run_stack.sh) honour the environment as given: with the hot
index on a Redis Cluster, the channel layer on a plain Redis and Celery on RabbitMQ, a fan
joins, is let in and sees it. Runs in the Redis Cluster pass of `make test`."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from django.conf import settings

from tests.http import request
from tests.processes import ROOT, free_port, process_env, wait_until

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.REDIS_CLUSTER, reason="runs in the Redis Cluster pass of `make test`"
    ),
]


def test_run_stack_serves_a_whole_journey_on_the_cluster(make_event, tmp_path) -> None:
    assert settings.CELERY_BROKER_URL.startswith("amqp://")
    event = make_event(slug="stack", capacity=1, rate_per_minute=0)
    port = free_port()
    log = open(tmp_path / "stack.log", "wb")
    stack = subprocess.Popen(
        ["scripts/run_stack.sh"],
        cwd=ROOT,
        env=process_env(BIND=f"127.0.0.1:{port}", WEB_CONCURRENCY="1", WORKER_CONCURRENCY="1"),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _up(base), timeout=30, what="the stack's web server")
        ticket = request("POST", f"{base}/api/v1/events/{event.slug}/join", {}).body["ticket"]
        body = wait_until(
            lambda: (
                (b := request("GET", f"{base}/api/v1/tickets/{ticket}").body)["status"]
                == "admitted"
                and b
            ),
            timeout=20,
            what="admission through RabbitMQ with the index on the cluster",
        )
        assert body["pass"]
    except BaseException:
        print((tmp_path / "stack.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        os.killpg(stack.pid, signal.SIGTERM)
        stack.wait(timeout=20)


def _up(base: str) -> bool:
    try:
        return request("GET", f"{base}/healthz").status == 200
    except OSError:
        return False
