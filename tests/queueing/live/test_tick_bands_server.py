"""Ticks by distance from the front, and the sockets' keep-alive at the heartbeat's pace, on the
real server (gunicorn + uvicorn, beat and a worker ticking the on-sale every second)."""

from __future__ import annotations

import json
import threading
import time
from itertools import pairwise

import pytest
from django.utils import timezone
from websockets.sync.client import connect

from queueing.hot.line_index import heartbeat_deadlines
from queueing.rules.layout import keepalive_seconds
from queueing.rules.tick_bands import FAR_SECONDS
from staff.services import event_pause
from tests.helpers import entry_of, fans_join
from tests.processes import running_stack

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

WATCH_SECONDS = 25


def open_socket(base: str, slug: str, ticket: str):
    ws_url = base.replace("http://", "ws://") + f"/ws/events/{slug}/?ticket={ticket}"
    return connect(ws_url, origin=base, open_timeout=10)


def ticks_seen(base: str, slug: str, ticket: str, into: list[float], until: float) -> None:
    """The ``at`` of every tick the page is sent until ``until`` (time.monotonic())."""
    with open_socket(base, slug, ticket) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
        while (left := until - time.monotonic()) > 0:
            try:
                message = json.loads(ws.recv(timeout=left))
            except TimeoutError:
                break
            if message["type"] == "tick":
                into.append(message["at"])


def test_the_front_gets_every_tick_and_a_far_back_page_one_at_most_10_s_apart(
    make_event,
) -> None:
    # Paused: the line stays as it is. Front band: the first 2 places; behind 20, far back.
    event = make_event(slug="bands", capacity=0, rate_per_minute=0, heartbeat_seconds=600)
    event_pause(event=event, actor="test", now=timezone.now())
    tickets = fans_join(event.slug, 30)
    with running_stack(WR_TICKS_FRONT_PLACES="2") as stack:
        base = stack.web(workers=1)
        stack.worker()
        stack.beat()
        front: list[float] = []
        far: list[float] = []
        until = time.monotonic() + WATCH_SECONDS
        pages = [
            threading.Thread(target=ticks_seen, args=(base, event.slug, tickets[0], front, until)),
            threading.Thread(target=ticks_seen, args=(base, event.slug, tickets[-1], far, until)),
        ]
        for page in pages:
            page.start()
        for page in pages:
            page.join()
    # The front page missed no tick the far-back page was sent, and saw many more.
    assert len(front) >= WATCH_SECONDS / 2
    assert set(far) <= set(front)
    assert 2 <= len(far) <= len(front) / 3
    # At most 10 s apart, unless the ticks themselves were late (the front saw a gap too:
    # on a loaded machine the beat's tick can come late, for every page alike).
    for a, b in pairwise(far):
        late = max((y - x for x, y in pairwise(t for t in front if a <= t <= b)), default=0)
        assert b - a <= FAR_SECONDS or late > 1.5, (far, front)


def test_open_sockets_keep_their_tickets_alive_at_a_third_of_the_heartbeat(make_event) -> None:
    event = make_event(slug="pace", capacity=0, rate_per_minute=0, heartbeat_seconds=60)
    event_pause(event=event, actor="test", now=timezone.now())
    (ticket,) = fans_join(event.slug, 1)
    member = entry_of(ticket).pk
    pace = keepalive_seconds(60)  # 20 s
    with running_stack() as stack:
        base = stack.web(workers=1)
        with open_socket(base, event.slug, ticket) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
            opened = time.monotonic()
            deadlines = [heartbeat_deadlines(event.pk, [member])[member]]
            while time.monotonic() - opened < pace + 6:
                time.sleep(0.25)
                deadline = heartbeat_deadlines(event.pk, [member])[member]
                if deadline != deadlines[-1]:
                    deadlines.append(deadline)
    # Pushed once in those 26 s (every 5 s it would have been 5 times), a heartbeat ahead.
    assert len(deadlines) == 2, deadlines
    assert deadlines[1] - deadlines[0] == pytest.approx(pace, abs=3)
