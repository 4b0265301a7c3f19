"""Edges of the lean ASGI paths (queueing/web/hot_paths.py): they stand where the URLconf
mounts their views and nowhere else, their own bugs are the API's JSON 500 rather than the
server's plain text, and their join queue is bounded in size and in time, a join refused
there never being committed (the client was told no)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.http import HttpResponse
from django.urls import include, path

from config.asgi import django_asgi_app
from queueing.models import QueueEntry
from queueing.web import api_fan, hot_paths, join_batcher, lean_routes
from queueing.web.hot_paths import HotPaths
from queueing.web.middleware import hot_path_headers
from tests.asgi import AsgiReply, asgi_call, call
from tests.helpers import join, new_fan

pytestmark = pytest.mark.django_db(transaction=True)


class _ToDjango:
    """The inner app: records what reached Django, then lets Django answer it."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])
        await django_asgi_app(scope, receive, send)


async def _refuse(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("went to Django")


def _identity_of_key(key: str) -> str:
    """What a fan joining with this Idempotency-Key is stored as (queueing/web/callers.py)."""
    return hashlib.sha256(f"idempotency:{key}".encode()).hexdigest()


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


# --- Where the lean paths answer: the URLconf says ------------------------------------------


def test_the_lean_paths_stand_where_the_project_urlconf_names_them() -> None:
    routes = lean_routes.lean_routes()
    assert [route.name for route in routes["GET"]] == ["api-ticket", "gate-check"]
    assert [route.name for route in routes["POST"]] == ["api-join"]
    (ticket, gate), (join,) = routes["GET"], routes["POST"]
    assert ticket.regex.match("/api/v1/tickets/1-2-3.sig")["ticket"] == "1-2-3.sig"
    assert join.regex.match("/api/v1/events/onsale/join")["slug"] == "onsale"
    assert gate.regex.match("/gate/on-sale_2/check")["slug"] == "on-sale_2"
    for other in ("/api/v1/tickets/a/b", "/api/v1/tickets/", "/x/api/v1/tickets/a"):
        assert not ticket.regex.match(other), other
    for other in ("/api/v1/events/onsale/join/", "/api/v1/events/onsale/challenge"):
        assert not join.regex.match(other), other
    for other in ("/gate/on.sale/check", "/gate/a/check/", "/gate//check", "/x/gate/a/check"):
        assert not gate.regex.match(other), other


def test_moving_the_urls_in_the_urlconf_moves_the_lean_paths(make_event, settings) -> None:
    event = make_event(capacity=0)
    settings.ROOT_URLCONF = "tests.queueing.web.moved_urls"
    django = _ToDjango()
    hot = HotPaths(django)
    joined = call(
        hot,
        "POST",
        f"/api/v9/sales/{event.slug}/enter",
        body=b"{}",
        headers={"idempotency-key": "moved"},
    )
    assert joined.status == 201
    ticket = joined.body["ticket"]
    status = call(hot, "GET", f"/api/v9/line/{ticket}")
    assert (status.status, status.body["position"]) == (200, 1)
    assert django.paths == []  # both answered on the lean paths, at their new URLs
    assert status.raw == call(django_asgi_app, "GET", f"/api/v9/line/{ticket}").raw
    # The old URLs are not theirs any more: Django answers them (and knows them no more).
    old_status = call(hot, "GET", f"/api/v1/tickets/{ticket}")
    old_join = call(hot, "POST", f"/api/v1/events/{event.slug}/join", body=b"{}")
    assert django.paths == [f"/api/v1/tickets/{ticket}", f"/api/v1/events/{event.slug}/join"]
    assert (old_status.status, old_join.status) == (404, 404)
    assert QueueEntry.objects.count() == 1


def _another_view(request: Any, ticket: str) -> HttpResponse:
    return HttpResponse("not the fan API")


class _NameOnAnotherView:
    urlpatterns = [path("api/v1/tickets/<str:ticket>", _another_view, name="api-ticket")]


class _ShadowedByAnEarlierUrl:
    urlpatterns = [
        path("api/v1/tickets/<str:ticket>", _another_view),
        path("api/v1/tickets/<str:ticket>", api_fan.ticket, name="api-ticket"),
    ]


class _OutsideTheApi:
    # Django renders errors as JSON under /api/ only: elsewhere the lean answers would differ.
    urlpatterns = [path("tickets/<str:ticket>", api_fan.ticket, name="api-ticket")]


class _WithAnArgumentTheLeanPathLacks:
    urlpatterns = [
        path(
            "api/<str:version>/",
            include([path("tickets/<str:ticket>", api_fan.ticket, name="api-ticket")]),
        )
    ]


@pytest.mark.parametrize(
    "urlconf",
    [_NameOnAnotherView, _ShadowedByAnEarlierUrl, _OutsideTheApi, _WithAnArgumentTheLeanPathLacks],
)
def test_a_named_url_that_may_not_lead_to_the_view_stays_djangos(settings, caplog, urlconf):
    settings.ROOT_URLCONF = urlconf
    assert "GET" not in lean_routes.lean_routes()
    assert "no lean path for api-ticket" in caplog.text
    django = _ToDjango()
    call(HotPaths(django), "GET", "/api/v1/tickets/1-2-3.sig")
    assert django.paths == ["/api/v1/tickets/1-2-3.sig"]


# --- A bug on a lean path: the API's JSON 500 ---------------------------------------------


def _assert_the_apis_500(reply: AsgiReply, caplog: Any, *, secure: bool = False) -> None:
    assert reply.status == 500
    assert reply.headers["content-type"] == "application/json"
    assert reply.body == {"error": "internal_error", "detail": "An unexpected error occurred."}
    assert int(reply.headers["content-length"]) == len(reply.raw)
    for name, value in hot_path_headers(secure=secure):
        assert reply.headers[name.decode()] == value.decode()
    logged = [r for r in caplog.records if r.exc_info and r.levelno == logging.ERROR]
    assert [r.exc_info[0] for r in logged] == [RuntimeError]
    assert "Traceback" in caplog.text


def test_a_bug_on_the_lean_status_path_is_the_apis_json_500(make_event, monkeypatch, caplog):
    event = make_event(capacity=0)
    ticket = join(new_fan(), event.slug).json()["ticket"]

    async def broken(*args: Any) -> None:
        raise RuntimeError("a bug on the status path")

    monkeypatch.setattr(hot_paths, "ticket_poll_async", broken)
    with caplog.at_level(logging.ERROR):
        reply = call(HotPaths(_refuse), "GET", f"/api/v1/tickets/{ticket}")
    _assert_the_apis_500(reply, caplog)
    assert caplog.records[-1].name == "queueing.web.hot_paths"


def test_a_bug_on_the_lean_join_path_is_the_apis_json_500(
    make_event, monkeypatch, caplog, settings
) -> None:
    event = make_event(capacity=0)
    settings.SECURE_HSTS_SECONDS = 3600

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug on the join path")

    monkeypatch.setattr(hot_paths, "read_body", broken)
    with caplog.at_level(logging.ERROR):
        reply = call(
            HotPaths(_refuse),
            "POST",
            f"/api/v1/events/{event.slug}/join",
            body=b"{}",
            scheme="https",
        )
    _assert_the_apis_500(reply, caplog, secure=True)
    assert "strict-transport-security" in reply.headers
    assert QueueEntry.objects.count() == 0


def test_a_bug_in_the_batch_itself_still_answers_each_of_its_joins(
    make_event, monkeypatch, caplog
) -> None:
    event = make_event(capacity=0)
    monkeypatch.setattr(join_batcher, "_commit_batch", lambda items: [])  # answers missing
    hot = HotPaths(_refuse)
    path_ = f"/api/v1/events/{event.slug}/join"

    async def together() -> list[AsgiReply]:
        joins = (
            asgi_call(hot, "POST", path_, body=b"{}", headers={"idempotency-key": f"fan-{i}"})
            for i in range(3)
        )
        # Without an answer for each, a join would wait for ever.
        return await asyncio.wait_for(asyncio.gather(*joins), 10)

    with caplog.at_level(logging.ERROR):
        replies = asyncio.run(together())
    assert [(r.status, r.body["error"]) for r in replies] == [(500, "internal_error")] * 3
    assert any(r.exc_info and r.exc_info[0] is ValueError for r in caplog.records)


# --- The join queue: bounded, with a deadline -----------------------------------------------


class _HeldCommit:
    """``join_batch`` held in the batch thread until released: a slow commit."""

    def __init__(self, monkeypatch: Any) -> None:
        self.committing = threading.Event()
        self.release = threading.Event()
        self.sizes: list[int] = []
        real = join_batcher.join_batch

        def held(items: Any) -> Any:
            self.sizes.append(len(items))
            self.committing.set()
            assert self.release.wait(timeout=30), "never released"
            return real(items)

        monkeypatch.setattr(join_batcher, "join_batch", held)

    async def until_committing(self) -> None:
        await _until(self.committing.is_set)


@pytest.fixture
def held(monkeypatch) -> Iterator[_HeldCommit]:
    commit = _HeldCommit(monkeypatch)
    yield commit
    commit.release.set()  # whatever happened, the batch thread is not left waiting


def _joiner(hot: HotPaths, slug: str) -> Callable[[str], Any]:
    def join_as(key: str) -> Any:
        return asgi_call(
            hot, "POST", f"/api/v1/events/{slug}/join", body=b"{}", headers={"idempotency-key": key}
        )

    return join_as


def _assert_unavailable(reply: AsgiReply) -> None:
    assert reply.status == 503
    assert reply.body["error"] == "unavailable"
    assert reply.headers["retry-after"] == "5"  # WR_UNAVAILABLE_RETRY_AFTER
    assert reply.headers["x-frame-options"] == "DENY"


def test_a_join_finding_the_queue_full_is_told_503_at_once(make_event, settings, held) -> None:
    event = make_event(capacity=0)
    settings.WR_JOIN_QUEUE_MAX = 2
    hot = HotPaths(_refuse)
    join_as = _joiner(hot, event.slug)

    async def scenario() -> tuple[AsgiReply, float, list[AsgiReply]]:
        first = asyncio.ensure_future(join_as("first"))
        await held.until_committing()
        queued = [asyncio.ensure_future(join_as(key)) for key in ("second", "third")]
        await _until(lambda: len(hot.joins._pending) == 2)  # the queue is full
        started = time.monotonic()
        refused = await asyncio.wait_for(join_as("one-too-many"), 5)
        waited = time.monotonic() - started
        assert not first.done() and not any(join.done() for join in queued)
        held.release.set()
        return refused, waited, [await first, *await asyncio.gather(*queued)]

    refused, waited, accepted = asyncio.run(scenario())
    _assert_unavailable(refused)
    assert waited < 1  # at once, not after the commit it would have waited for
    assert [reply.status for reply in accepted] == [201, 201, 201]
    assert held.sizes == [1, 2]
    assert QueueEntry.objects.count() == 3
    assert not QueueEntry.objects.filter(identity=_identity_of_key("one-too-many")).exists()


def test_a_join_past_its_deadline_is_told_503_and_never_committed(
    make_event, settings, held
) -> None:
    event = make_event(capacity=0)
    settings.WR_JOIN_QUEUE_DEADLINE_SECONDS = 0.3
    hot = HotPaths(_refuse)
    join_as = _joiner(hot, event.slug)

    async def scenario() -> tuple[AsgiReply, float, AsgiReply]:
        first = asyncio.ensure_future(join_as("first"))
        await held.until_committing()
        started = time.monotonic()
        late = await asyncio.wait_for(join_as("late"), 5)
        waited = time.monotonic() - started
        assert not first.done()  # told at its deadline, while the commit before it still runs
        await asyncio.sleep(0.3)  # the committing join is now past its own deadline too
        held.release.set()
        return late, waited, await first

    late, waited, first = asyncio.run(scenario())
    _assert_unavailable(late)
    assert 0.3 <= waited < 2
    assert first.status == 201  # already committing: never abandoned
    assert held.sizes == [1]  # the late join reached no batch
    assert list(QueueEntry.objects.values_list("identity", flat=True)) == [
        _identity_of_key("first")
    ]


def test_a_deadline_that_passed_unnoticed_is_caught_when_the_next_batch_forms(
    make_event, settings, held, monkeypatch
) -> None:
    event = make_event(capacity=0)
    settings.WR_JOIN_QUEUE_DEADLINE_SECONDS = 0.2
    # The deadline's timer is late (a busy loop): the batch being formed must still check.
    monkeypatch.setattr(join_batcher.JoinBatcher, "_arm_expiry", lambda self, loop: None)
    hot = HotPaths(_refuse)
    join_as = _joiner(hot, event.slug)

    async def scenario() -> list[AsgiReply]:
        first = asyncio.ensure_future(join_as("first"))
        await held.until_committing()
        late = asyncio.ensure_future(join_as("late"))
        await asyncio.sleep(0.3)
        on_time = asyncio.ensure_future(join_as("on-time"))
        await _until(lambda: len(hot.joins._pending) == 2)
        assert not late.done()
        held.release.set()
        return [await first, await late, await on_time]

    first, late, on_time = asyncio.run(scenario())
    assert (first.status, on_time.status) == (201, 201)
    _assert_unavailable(late)
    assert held.sizes == [1, 1]  # the next batch formed without the late join
    assert set(QueueEntry.objects.values_list("identity", flat=True)) == {
        _identity_of_key("first"),
        _identity_of_key("on-time"),
    }
