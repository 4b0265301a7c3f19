"""A Redis outage with fans polling (issue 18): the room keeps answering from PostgreSQL with
approximate positions and fewer polls, nobody loses their place to the heartbeats that could
not be recorded, and positions are exact again once the index is back.

Against the real processes, the hot index on a private Redis of the test's own; the Celery
broker and the channel layer stay on the shared one ("the broker elsewhere")."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from django.conf import settings
from django.utils import timezone

from events.services import event_pause
from queueing.models import QueueEntry
from tests.faults import RedisServer
from tests.http import request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

STABLE_REDIS = settings.REDIS_URL
HEARTBEAT = 10  # seconds (the least allowed): a 14 s outage passes every deadline


class PollingFans:
    """Fans who poll as the page does, each when ``X-Poll-After-Seconds`` says."""

    def __init__(self, base: str, tickets: list[str]) -> None:
        self.base = base
        self.tickets = tickets
        self.answers: list[tuple[float, str, dict, float]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._fan, args=(t,)) for t in tickets]

    def _fan(self, ticket: str) -> None:
        while not self.stop.is_set():
            reply = request("GET", f"{self.base}/api/v1/tickets/{ticket}")
            headers = {name.lower(): value for name, value in reply.headers.items()}
            after = float(headers["x-poll-after-seconds"])
            self.answers.append((time.monotonic(), ticket, reply.body, after))
            self.stop.wait(after)

    def __enter__(self) -> PollingFans:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=15)


def test_fans_polling_through_a_redis_outage_lose_nothing(make_event, tmp_path) -> None:
    hot = RedisServer(tmp_path)
    hot.start()
    event = make_event(slug="out", capacity=1, rate_per_minute=0, heartbeat_seconds=HEARTBEAT)
    # Paused: nobody is let in, so every fan's place is judged by expiry alone.
    event_pause(event=event, actor="test", now=timezone.now())
    try:
        with running_stack(
            REDIS_URL=hot.url,
            CELERY_BROKER_URL=STABLE_REDIS,
            CHANNELS_REDIS_URL=STABLE_REDIS,
            REDIS_SOCKET_TIMEOUT="0.2",
        ) as stack:
            base = stack.web()
            stack.worker()
            stack.beat()
            tickets = [
                request("POST", f"{base}/api/v1/events/out/join", {}).body["ticket"]
                for _ in range(12)
            ]
            waiting = tickets
            with PollingFans(base, waiting) as fans:
                time.sleep(2)
                # Paused with its data: every deadline passes while nobody can record one.
                hot.proc.send_signal(signal.SIGSTOP)
                paused_at = time.monotonic()
                time.sleep(HEARTBEAT + 4)
                hot.proc.send_signal(signal.SIGCONT)
                resumed_at = time.monotonic()
                time.sleep(HEARTBEAT + 5)  # ticks run on the old deadlines now
                during = [a for a in fans.answers if paused_at + 1 < a[0] < resumed_at]
                assert during, "no poll was answered during the outage"
                assert all(a[2]["approximate"] is True for a in during)
                assert all(a[3] == 3.0 for a in during)  # 1 s normally, at most 3x
                assert all(a[2]["position"] is not None for a in during)
                assert QueueEntry.objects.filter(event=event, status="expired").count() == 0

                # Then killed, and back empty: rebuilt, and exact again.
                hot.kill()
                time.sleep(3)
                hot.start()
                wait_until(
                    lambda: (
                        request("GET", f"{base}/api/v1/tickets/{waiting[0]}").body["approximate"]
                        is False
                    ),
                    timeout=20,
                    what="the index to be rebuilt",
                )
            assert QueueEntry.objects.filter(event=event, status="expired").count() == 0
            positions = [
                request("GET", f"{base}/api/v1/tickets/{t}").body["position"] for t in waiting
            ]
            assert positions == list(range(1, len(waiting) + 1))
    finally:
        hot.kill()
