"""The lean join path's batches (queueing/web/join_batcher.py) linger for the joins that come
after their first (``WR_JOIN_LINGER_MS``), never past a full batch; and a laned on-sale's new
fans of one batch land in one lane, committed as one part under that lane's chain head."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from config.asgi import django_asgi_app
from queueing.models import AuditRecord, QueueEntry
from queueing.records.audit_verify import audit_event_verify
from queueing.web import join_batcher
from queueing.web.hot_paths import HotPaths
from tests.asgi import AsgiReply, asgi_call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def batch_sizes(monkeypatch) -> list[int]:
    """The size of every batch the batch thread commits (each committed for real)."""
    sizes: list[int] = []
    real = join_batcher.join_batch

    def counted(items: Any) -> Any:
        sizes.append(len(items))
        return real(items)

    monkeypatch.setattr(join_batcher, "join_batch", counted)
    return sizes


def _join(hot: HotPaths, slug: str, key: str | None = None) -> Any:
    headers = {"idempotency-key": key} if key else {}
    return asgi_call(hot, "POST", f"/api/v1/events/{slug}/join", body=b"{}", headers=headers)


def test_a_batch_lingers_for_the_joins_after_its_first(make_event, settings, batch_sizes):
    event = make_event(capacity=0)
    settings.WR_JOIN_LINGER_MS = 600
    hot = HotPaths(django_asgi_app)

    async def scenario() -> tuple[list[AsgiReply], float]:
        started = time.monotonic()
        first = asyncio.ensure_future(_join(hot, event.slug, "first"))
        await asyncio.sleep(0.1)
        second = asyncio.ensure_future(_join(hot, event.slug, "second"))
        await asyncio.sleep(0.1)
        third = asyncio.ensure_future(_join(hot, event.slug, "third"))
        replies = await asyncio.wait_for(asyncio.gather(first, second, third), 30)
        return list(replies), time.monotonic() - started

    replies, took = asyncio.run(scenario())
    assert [reply.status for reply in replies] == [201, 201, 201]
    assert batch_sizes == [3]
    assert took >= 0.6  # the first waited for the others


def test_a_full_batch_does_not_linger(make_event, settings, batch_sizes) -> None:
    event = make_event(capacity=0)
    settings.WR_JOIN_LINGER_MS = 60_000
    settings.WR_JOIN_BATCH_MAX = 2
    hot = HotPaths(django_asgi_app)

    async def scenario() -> list[AsgiReply]:
        joins = [_join(hot, event.slug, key) for key in ("a", "b")]
        return list(await asyncio.wait_for(asyncio.gather(*joins), 20))

    replies = asyncio.run(scenario())
    assert [reply.status for reply in replies] == [201, 201]
    assert batch_sizes == [2]


def test_without_linger_a_lone_join_goes_at_once(make_event, settings, batch_sizes) -> None:
    event = make_event(capacity=0)
    settings.WR_JOIN_LINGER_MS = 0
    hot = HotPaths(django_asgi_app)

    async def scenario() -> list[AsgiReply]:
        first = await asyncio.wait_for(_join(hot, event.slug, "a"), 20)
        return [first, await asyncio.wait_for(_join(hot, event.slug, "b"), 20)]

    assert [reply.status for reply in asyncio.run(scenario())] == [201, 201]
    assert batch_sizes == [1, 1]


def test_a_batchs_new_fans_join_one_lane_in_one_part(make_event, settings, batch_sizes) -> None:
    event = make_event(slug="laned", capacity=0, lanes=8)
    settings.WR_JOIN_LINGER_MS = 500
    hot = HotPaths(django_asgi_app)

    async def scenario(keys: list[str | None]) -> list[AsgiReply]:
        joins = [_join(hot, event.slug, key) for key in keys]
        return list(await asyncio.wait_for(asyncio.gather(*joins), 30))

    new_fans = asyncio.run(scenario([None] * 12))
    assert [reply.status for reply in new_fans] == [201] * 12
    assert all("set-cookie" in reply.headers for reply in new_fans)
    assert batch_sizes == [12]
    (lane,) = set(QueueEntry.objects.values_list("lane", flat=True))
    joined = AuditRecord.objects.filter(action="joined").order_by("seq")
    assert {record.lane for record in joined} == {lane}
    assert [record.seq for record in joined] == list(range(1, 13))  # one part: no gaps
    # Fans who bring an identity (here a key) keep the lane its hash gives.
    known = asyncio.run(scenario([f"key-{n}" for n in range(24)]))
    assert [reply.status for reply in known] == [201] * 24
    assert QueueEntry.objects.values("lane").distinct().count() > 1
    assert audit_event_verify(event_id=event.id).ok
