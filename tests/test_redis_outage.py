"""A Redis outage with fans polling (issue 18), against the real processes: gunicorn with
uvicorn workers, a Celery worker and beat on RabbitMQ, the hot index on a redis-server of the
test's own that is stalled, then killed.

During each outage every poll is answered, placed from the line's snapshot (approximate where
it is) and asked to come back later; admission goes on at its pace. The heartbeat is the
shortest allowed (10 s) and each outage longer than it: nobody is expired for heartbeats
Redis could not record, and once Redis is back every position is exact.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from queueing.hot import keys
from queueing.models import ORDER_KEY_SEQUENCE as SEQUENCE
from queueing.models import QueueEntry
from queueing.rules.layout import poll_after_seconds
from queueing.rules.ticket_codec import TicketRef, ticket_issue
from staff.services import event_pause, event_resume
from tests.brokers import AMQP_URL, amqp_queue_delete, amqp_require
from tests.faults import RedisServer
from tests.helpers import admission_halted, tickets_in_line_order, waiting_entries
from tests.http import request
from tests.processes import celery_queue, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

FANS = 240
HEARTBEAT = 10
OUTAGE = HEARTBEAT + 1.5


@pytest.fixture
def rabbitmq() -> Iterator[str]:
    amqp_require()
    try:
        yield AMQP_URL
    finally:
        amqp_queue_delete(celery_queue())


@dataclass
class Answer:
    at: float
    status: str
    position: int | None
    approximate: bool
    poll_after: float


@dataclass
class Fans:
    """Every fan polls their ticket when the last answer said to (as the waiting page
    does), collecting the pass once admitted."""

    base: str
    tickets: list[str]
    answers: dict[str, list[Answer]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        due = dict.fromkeys(self.tickets, 0.0)
        with ThreadPoolExecutor(max_workers=16) as pool:
            while not self.stopping.is_set():
                now = time.monotonic()
                ready = [t for t, at in due.items() if at <= now]
                for ticket, answer in zip(ready, pool.map(self.poll, ready), strict=True):
                    if answer is None:
                        due[ticket] = time.monotonic() + 1
                    elif answer.status == "waiting":
                        due[ticket] = time.monotonic() + answer.poll_after
                    else:
                        del due[ticket]  # admitted, the pass handed over in this answer
                time.sleep(0.05)

    def poll(self, ticket: str) -> Answer | None:
        reply = request("GET", f"{self.base}/api/v1/tickets/{ticket}")
        if reply.status != 200:
            self.failures.append(f"{reply.status} {reply.body}")
            return None
        answer = Answer(
            at=time.monotonic(),
            status=reply.body["status"],
            position=reply.body["position"],
            approximate=reply.body["approximate"],
            poll_after=float(reply.headers["x-poll-after-seconds"]),
        )
        self.answers.setdefault(ticket, []).append(answer)
        return answer

    def between(self, start: float, end: float) -> list[Answer]:
        return [a for answers in self.answers.values() for a in answers if start <= a.at < end]


def line_of(event, count: int) -> list[str]:
    """``count`` fans in line, their order keys in two runs far apart, as in a room whose one
    sequence also serves other on-sales: keys this few and dense would all be checkpoints of
    the snapshot (its even buckets then hold a fan or two each), and no position approximate,
    whoever is admitted before the outage."""
    tier = event.tiers.get()
    waiting_entries(event, tier, count // 2, prefix="fan")
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(%s, nextval(%s) + 10 * %s)", [SEQUENCE, SEQUENCE, count])
    waiting_entries(event, tier, count - count // 2, prefix="later")
    return tickets_in_line_order(event, tier)


def admitted(event) -> int:
    return QueueEntry.objects.filter(event=event, status="admitted").count()


def test_a_redis_outage_expires_nobody_and_positions_are_exact_after_it(
    make_event, tmp_path, rabbitmq
) -> None:
    hot = RedisServer(tmp_path)
    hot.start()
    probe = redis.Redis(port=hot.port, socket_timeout=1)
    event = make_event(
        slug="outage",
        capacity=0,
        rate_per_minute=60,
        heartbeat_seconds=HEARTBEAT,
        session_seconds=3600,
    )
    tickets = line_of(event, FANS)
    epoch_key = keys.epoch(event.id)

    def index_whole() -> bool:
        try:
            return (probe.get(epoch_key) or b"").startswith(b"ready:")
        except redis.RedisError:
            return False

    fans = Fans(base="", tickets=tickets)
    try:
        with running_stack(
            REDIS_URL=hot.url,
            CELERY_BROKER_URL=rabbitmq,
            CHANNELS_REDIS_URL=settings.REDIS_URL,
            REDIS_SOCKET_TIMEOUT="0.5",
            # Positions of a line this short would be counted exactly; a million's are not.
            WR_DEGRADED_EXACT_LINE="50",
        ) as stack:
            fans.base = stack.web(workers=2)
            stack.worker()
            stack.beat()
            wait_until(index_whole, timeout=20, what="the index, built by the maintenance task")
            polling = threading.Thread(target=fans.run, daemon=True)
            polling.start()
            time.sleep(3)

            windows = []  # (from, to) of each outage
            # First stalled, its data kept: when it answers again every deadline in it has
            # passed. The sale paused meanwhile, so that no admission flags the index for a
            # rebuild: only the heartbeats that could not be recorded keep the fans in line.
            # Then killed, and back empty, with admission going on.
            for stop, back, paused in ((hot.pause, hot.resume, True), (hot.kill, hot.start, False)):
                if paused:
                    event_pause(event=event, actor="test", now=timezone.now())
                before = admitted(event)
                started = time.monotonic()
                stop()
                time.sleep(OUTAGE)
                let_in = admitted(event) - before
                back()
                windows.append((started, time.monotonic()))
                wait_until(index_whole, timeout=20, what="the index after the outage")
                time.sleep(3)  # ticks with Redis back: anyone overdue would expire now
                assert QueueEntry.objects.filter(event=event, status="expired").count() == 0
                if paused:
                    event_resume(event=event, actor="test", now=timezone.now())
                else:
                    # Admission kept its pace from PostgreSQL (60 a minute, RabbitMQ's ticks).
                    assert let_in >= OUTAGE * 0.6

            # Held (the fans still polling, so that no heartbeat lapses meanwhile), so that
            # nobody is let in, and the line moves up, while the positions are read below.
            admission_halted(event)
            fans.stopping.set()
            polling.join(timeout=10)
            assert not fans.failures, fans.failures[:3]
            for started, ended in windows:
                waiting = [a for a in fans.between(started + 1.5, ended) if a.status == "waiting"]
                assert len(waiting) > FANS / 3
                assert any(a.approximate for a in waiting)
                assert all(
                    a.poll_after
                    == poll_after_seconds(
                        heartbeat_seconds=HEARTBEAT, position=a.position, degraded=True
                    )
                    for a in waiting
                )
            # After it, every fan still in line is told their exact place.
            in_line = list(
                QueueEntry.objects.filter(event=event, status="waiting").order_by("order_key")
            )
            tickets = [
                ticket_issue(TicketRef(entry_id=e.id, event_id=event.id, tier_id=e.tier_id))
                for e in in_line
            ]

            def read_places() -> list[dict]:
                return [request("GET", f"{fans.base}/api/v1/tickets/{t}").body for t in tickets]

            # Each place is right at once; an answer may still say "approximate" for a moment
            # while a web process replaces the connections the restarted Redis dropped.
            now_answers = read_places()
            assert [a["position"] for a in now_answers] == list(range(1, len(in_line) + 1))
            wait_until(
                lambda: not any(a["approximate"] for a in read_places()),
                timeout=15,
                what="exact places from every web process",
            )
            assert QueueEntry.objects.filter(event=event, status="expired").count() == 0
            assert len(in_line) + admitted(event) == FANS
    finally:
        fans.stopping.set()
        hot.kill()
