"""WebSockets on the real server (gunicorn + uvicorn, channels-redis pub/sub)."""

from __future__ import annotations

import json
import time

import pytest
from django.utils import timezone
from websockets.sync.client import connect

from queueing.live.ticks import broadcast_tick
from staff.services import event_pause
from tests.helpers import entry_of
from tests.http import request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def open_socket(base: str, slug: str, ticket: str):
    ws_url = base.replace("http://", "ws://") + f"/ws/events/{slug}/?ticket={ticket}"
    return connect(ws_url, origin=base, open_timeout=10)


def test_an_idle_socket_survives_15_seconds_and_still_gets_ticks(make_event) -> None:
    event = make_event(slug="idle", heartbeat_seconds=600)
    with running_stack() as stack:
        base = stack.web(workers=1)
        ticket = request("POST", f"{base}/api/v1/events/idle/join", {}).body["ticket"]
        with open_socket(base, "idle", ticket) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
            # No beat runs: nothing at all crosses the socket or the pub/sub connection.
            time.sleep(15)
            assert broadcast_tick(event_id=event.id, now=timezone.now())
            tick = json.loads(ws.recv(timeout=10))
            assert tick["type"] == "tick"
            assert tick["queue_length"] == 1


def test_an_open_socket_keeps_its_ticket_alive(make_event) -> None:
    # Paused: nobody is admitted, so only heartbeats decide who stays.
    event = make_event(slug="alive", heartbeat_seconds=10, away_seconds=0)
    event_pause(event=event, actor="test", now=timezone.now())
    with running_stack() as stack:
        base = stack.web(workers=1)
        join = lambda: request("POST", f"{base}/api/v1/events/alive/join", {}).body["ticket"]  # noqa: E731
        watched, unwatched = join(), join()
        stack.worker()
        stack.beat()
        with open_socket(base, "alive", watched) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
            # Read from PostgreSQL: polling the API would itself keep the ticket alive.
            wait_until(
                lambda: entry_of(unwatched).status == "expired",
                timeout=30,
                what="the unwatched ticket to expire",
            )
            started = time.monotonic()
            while time.monotonic() - started < 15:
                ws.recv(timeout=5)  # ticks keep coming; the page never polls
        assert entry_of(watched).status == "waiting"
