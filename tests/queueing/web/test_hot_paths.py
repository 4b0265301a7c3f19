"""The lean ASGI paths (queueing/web/hot_paths.py) answer exactly as Django would, and leave to
Django every request they are not sure about."""

from __future__ import annotations

import asyncio
import hashlib
import json
from http.cookies import SimpleCookie
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIHandler
from django.db import OperationalError
from django.test import Client
from django.utils import timezone

from config.asgi import django_asgi_app
from queueing import in_process
from queueing.line import reads
from queueing.line.place_links import place_link_claim
from queueing.models import QueueEntry
from queueing.records.audit_verify import audit_chain_verify, audit_event_verify
from queueing.rules.ticket_codec import ticket_read
from queueing.web import join_batcher
from queueing.web.hot_paths import HotPaths
from staff.services import TierSpec
from tests.asgi import AsgiReply, asgi_call, call
from tests.helpers import join, new_fan, place_link_for, staff_user

pytestmark = pytest.mark.django_db(transaction=True)


def _as_lean(django_headers: dict[str, str]) -> dict[str, str]:
    """Django's headers less the differences docs/api-additions.md ("Hot paths") documents:
    lean answers are not translated, so they have no Content-Language and no Accept-Language
    in Vary. Nothing else is set aside, not even Date or Server: both kinds of answer leave
    through the same ASGI server, which adds those itself (in process here: neither has them).
    Nor X-Request-ID: a new id each request, given to both kinds of answer by the ASGI wrapper
    in front of the room (queueing/web/request_ids.py; tests/queueing/web/test_request_ids.py),
    which Django's own middleware stands in for here.
    """
    headers = {
        name: value
        for name, value in django_headers.items()
        if name not in {"content-language", "x-request-id"}
    }
    vary = [
        token.strip()
        for token in headers.pop("vary", "").split(",")
        if token.strip() and token.strip().lower() != "accept-language"
    ]
    if vary:
        headers["vary"] = ", ".join(vary)
    return headers


def _without_ticket(reply: AsgiReply) -> bytes:
    """The body with its own ticket set aside: two fans' tickets name two entries."""
    return reply.raw.replace(reply.body["ticket"].encode(), b"<ticket>")


def _cookie(reply: AsgiReply) -> tuple[str, dict[str, str]]:
    """The identity cookie's name and attributes; not its value (a new fan's own) nor its
    expiry date (the second it was set; its Max-Age is compared)."""
    (morsel,) = SimpleCookie(reply.headers["set-cookie"]).values()
    return morsel.key, {name: value for name, value in morsel.items() if name != "expires"}


def test_the_middleware_the_lean_paths_mirror_is_pinned(settings) -> None:
    # The lean paths answer without Django's middleware. Of this list they mirror
    # SecurityMiddleware and XFrameOptionsMiddleware (their headers, asked of them:
    # queueing.web.middleware.hot_path_headers), ApiErrorMiddleware (its mapping, through
    # api_exception_response, and their own catch-all), SessionMiddleware's "Vary: Cookie"
    # on a join that asks who the fan is, and CommonMiddleware's Content-Length. The rest
    # they skip knowingly: CSP is for HTML pages; Locale's Content-Language is the documented
    # difference; CSRF, auth and messages do not concern an anonymous JSON join (a session
    # cookie sends the join to Django); NulInput is for pages, not /api/ (a join's JSON
    # fields are judged one by one, as the view judges them); django-prometheus's two count
    # the requests Django serves, and the lean paths have their own latency histograms and
    # count their refusals themselves (queueing/web/edge_figures.py). Whoever
    # adds, removes or reorders a middleware must decide whether the lean paths
    # (queueing/web/hot_paths.py) have to mirror it too, and then update this list: that is
    # why it is pinned.
    assert settings.MIDDLEWARE == [
        "queueing.web.request_ids.RequestIdMiddleware",
        "django_prometheus.middleware.PrometheusBeforeMiddleware",
        "django.middleware.security.SecurityMiddleware",
        "queueing.web.middleware.ContentSecurityPolicyMiddleware",
        "queueing.web.middleware.ApiErrorMiddleware",
        "queueing.web.middleware.NulInputMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.locale.LocaleMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
        "django_prometheus.middleware.PrometheusAfterMiddleware",
    ]


@pytest.fixture
def hot() -> HotPaths:
    return HotPaths(django_asgi_app)


@pytest.mark.parametrize("lanes", [1, 4])
def test_status_of_a_waiting_fan_is_answered_as_django_answers_it(make_event, hot) -> None:
    event = make_event(capacity=0)
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    path = f"/api/v1/tickets/{tickets[1]}"
    lean = call(hot, "GET", path)
    plain = call(django_asgi_app, "GET", path)
    assert lean.status == plain.status == 200
    assert lean.raw == plain.raw  # byte for byte
    assert lean.body["position"] == 2
    assert lean.headers == _as_lean(plain.headers)  # every header, names and values
    assert "content-language" in plain.headers  # (the documented difference is real)
    assert lean.headers["x-frame-options"] == "DENY"
    assert lean.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("lanes", [1, 4])
def test_the_lean_status_path_really_answers_without_django(make_event, hot, monkeypatch):
    event = make_event(capacity=0)
    ticket = join(new_fan(), event.slug).json()["ticket"]

    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    lean_only = HotPaths(refuse)
    assert call(lean_only, "GET", f"/api/v1/tickets/{ticket}").body["position"] == 1


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_moved_places_old_ticket_is_refused_and_its_new_one_answered_lean(make_event, hot):
    """Issue 28, item 4: the lean path must not answer the ticket a place had before it moved
    to another browser (line/place_links.py); the new browser's ticket stays on it."""
    event = make_event(capacity=0)
    old = join(new_fan(), event.slug).json()["ticket"]
    entry = QueueEntry.objects.get()
    token = place_link_for(entry)
    new = place_link_claim(token=token, event_id=event.id, now=timezone.now()).ticket
    refused = call(hot, "GET", f"/api/v1/tickets/{old}")
    assert (refused.status, refused.body["error"]) == (410, "place_moved")
    assert refused.raw == call(django_asgi_app, "GET", f"/api/v1/tickets/{old}").raw

    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    assert call(HotPaths(refuse), "GET", f"/api/v1/tickets/{new}").body["position"] == 1


@pytest.mark.parametrize("lanes", [1, 4])
def test_a_prequeue_ticket_is_answered_on_the_lean_path(make_event) -> None:
    event = make_event(
        prequeue_opens_at=timezone.now() - timezone.timedelta(minutes=1),
        starts_at=timezone.now() + timezone.timedelta(hours=1),
    )
    ticket = join(new_fan(), event.slug).json()["ticket"]

    async def refuse(*args: Any) -> None:
        raise AssertionError("went to Django")

    reply = call(HotPaths(refuse), "GET", f"/api/v1/tickets/{ticket}")
    assert reply.body["status"] == "prequeue"
    assert reply.body["position"] is None
    plain = call(django_asgi_app, "GET", f"/api/v1/tickets/{ticket}")
    assert reply.raw == plain.raw
    assert reply.headers == _as_lean(plain.headers)


@pytest.mark.parametrize("lanes", [1, 4])
def test_what_the_hot_index_cannot_answer_goes_to_django(make_event, hot, redis_client) -> None:
    from queueing.beat import event_tick

    event = make_event(capacity=1, rate_per_minute=0)
    admitted, waiting = (join(new_fan(), event.slug).json()["ticket"] for _ in range(2))
    event_tick(event_id=event.id, now=timezone.now())
    reply = call(hot, "GET", f"/api/v1/tickets/{admitted}")
    assert reply.status == 200
    assert reply.body["status"] == "admitted"
    assert reply.body["pass"]  # only Django's path issues passes
    assert call(hot, "GET", "/api/v1/tickets/1-2-3.forged").body["error"] == "invalid_ticket"
    # The index lost (Redis flushed): PostgreSQL answers, in degraded mode.
    for key in redis_client.scan_iter(match="*"):
        if b"wrtest" in key:
            redis_client.delete(key)
    reply = call(hot, "GET", f"/api/v1/tickets/{waiting}")
    assert reply.status == 200
    assert reply.body["position"] == 1


def test_a_host_django_refuses_and_plain_http_under_https_go_to_django(
    make_event, hot, settings
) -> None:
    event = make_event(capacity=0)
    ticket = join(new_fan(), event.slug).json()["ticket"]
    reply = call(hot, "GET", f"/api/v1/tickets/{ticket}", headers={"host": "evil.example"})
    assert reply.status == 400
    assert reply.body["error"] == "bad_request"
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    hot = HotPaths(ASGIHandler())  # Django's middleware reads the setting when it loads
    reply = call(hot, "POST", f"/api/v1/events/{event.slug}/join")
    assert reply.status == 301
    assert reply.headers["location"].startswith("https://")
    assert QueueEntry.objects.count() == 1
    secure = call(hot, "GET", f"/api/v1/tickets/{ticket}", scheme="https")
    assert secure.status == 200
    assert "strict-transport-security" in secure.headers
    # Behind a TLS proxy: secure as Django's own request object says.
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    proxied = call(hot, "GET", f"/api/v1/tickets/{ticket}", headers={"x-forwarded-proto": "https"})
    assert proxied.status == 200
    assert "strict-transport-security" in proxied.headers
    assert call(hot, "GET", f"/api/v1/tickets/{ticket}").status == 301


def test_a_join_on_the_lean_path_sets_the_identity_cookie_and_is_idempotent(
    make_event, hot
) -> None:
    event = make_event(capacity=0)
    first = call(hot, "POST", f"/api/v1/events/{event.slug}/join", body=b"{}")
    assert first.status == 201
    assert first.headers["x-poll-after-seconds"]
    assert first.headers["x-frame-options"] == "DENY"
    cookie = first.headers["set-cookie"].split(";")[0]
    assert cookie.startswith("wr_id=")
    again = call(
        hot, "POST", f"/api/v1/events/{event.slug}/join", body=b"{}", headers={"cookie": cookie}
    )
    assert again.status == 200
    assert again.body["ticket"] == first.body["ticket"]
    keyed = [
        call(
            hot,
            "POST",
            f"/api/v1/events/{event.slug}/join",
            body=b"{}",
            headers={"idempotency-key": "fan-7"},
        )
        for _ in range(2)
    ]
    assert [r.status for r in keyed] == [201, 200]
    assert "set-cookie" not in keyed[0].headers


def test_joins_are_answered_as_django_answers_them(make_event, hot) -> None:
    event = make_event(capacity=0)
    path = f"/api/v1/events/{event.slug}/join"
    # 201, for a fan with an Idempotency-Key. Two new joins are two fans: the first leaves
    # before the second joins, so that both find the same line.
    lean = call(hot, "POST", path, body=b"{}", headers={"idempotency-key": "lean-fan"})
    assert call(hot, "DELETE", f"/api/v1/tickets/{lean.body['ticket']}").status == 204
    plain = call(django_asgi_app, "POST", path, body=b"{}", headers={"idempotency-key": "fan"})
    assert lean.status == plain.status == 201
    assert _without_ticket(lean) == _without_ticket(plain)
    assert lean.headers == _as_lean(plain.headers)
    assert lean.headers["vary"] == "Cookie"  # the answer depends on who the fan is
    # 200, the same fan again: nothing set aside.
    lean_again = call(hot, "POST", path, body=b"{}", headers={"idempotency-key": "fan"})
    plain_again = call(
        django_asgi_app, "POST", path, body=b"{}", headers={"idempotency-key": "fan"}
    )
    assert lean_again.status == plain_again.status == 200
    assert lean_again.raw == plain_again.raw
    assert lean_again.headers == _as_lean(plain_again.headers)
    # 201 for a browser without an identity: a new cookie, set as Django sets it.
    assert call(hot, "DELETE", f"/api/v1/tickets/{plain.body['ticket']}").status == 204
    lean = call(hot, "POST", path, body=b"{}")
    assert call(hot, "DELETE", f"/api/v1/tickets/{lean.body['ticket']}").status == 204
    plain = call(django_asgi_app, "POST", path, body=b"{}")
    assert lean.status == plain.status == 201
    assert _without_ticket(lean) == _without_ticket(plain)
    assert _cookie(lean) == _cookie(plain)
    assert _cookie(lean)[1]["max-age"]
    del lean.headers["set-cookie"]
    assert lean.headers == {
        name: value for name, value in _as_lean(plain.headers).items() if name != "set-cookie"
    }


def test_bad_joins_get_the_same_answers_on_both_paths(make_event, hot) -> None:
    event = make_event(
        capacity=0,
        tiers=[TierSpec(name="Public"), TierSpec(name="Club", access_codes=["CLUB-1"])],
    )
    cases = [
        ("/api/v1/events/no-such-sale/join", b"{}"),
        (f"/api/v1/events/{event.slug}/join", b"[1"),
        (f"/api/v1/events/{event.slug}/join", b"[]"),
        (f"/api/v1/events/{event.slug}/join", b'{"access_code": "WRONG-CODE"}'),
        (f"/api/v1/events/{event.slug}/join", b'{"access_code": 7}'),
    ]
    for path, body in cases:
        headers = {"idempotency-key": "same-fan"}
        lean = call(hot, "POST", path, body=body, headers=headers)
        plain = call(django_asgi_app, "POST", path, body=body, headers=headers)
        assert (lean.status, lean.body) == (plain.status, plain.body), (path, body)
        assert lean.status in (400, 404)
    assert QueueEntry.objects.count() == 0


def test_an_oversized_join_body_is_refused(make_event, hot, settings) -> None:
    event = make_event(capacity=0)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = json.dumps({"access_code": "x" * 5000}).encode()
    reply = call(hot, "POST", f"/api/v1/events/{event.slug}/join", body=body)
    assert (reply.status, reply.body["error"]) == (400, "bad_request")
    assert QueueEntry.objects.count() == 0


def test_a_logged_in_fan_joins_through_django_as_their_account(make_event, hot) -> None:
    event = make_event(capacity=0)
    user = staff_user("fan", staff=False)
    browser = Client()
    browser.force_login(user)
    session = browser.cookies["sessionid"].value
    replies = [
        call(
            hot,
            "POST",
            f"/api/v1/events/{event.slug}/join",
            body=b"{}",
            headers={"cookie": f"sessionid={session}"},
        )
        for _ in range(2)
    ]
    assert [r.status for r in replies] == [201, 200]
    expected = hashlib.sha256(f"user:{user.pk}".encode()).hexdigest()
    assert QueueEntry.objects.get().identity == expected
    assert (
        browser.post(
            f"/api/v1/events/{event.slug}/join", data={}, content_type="application/json"
        ).json()["ticket"]
        == replies[0].body["ticket"]
    )


def batch_sizes_counted(monkeypatch) -> list[int]:
    """The size of each batch the lean join path commits from now on, in order."""
    sizes: list[int] = []
    real_join_batch = join_batcher.join_batch

    def counting(items: Any) -> Any:
        sizes.append(len(items))
        return real_join_batch(items)

    monkeypatch.setattr(join_batcher, "join_batch", counting)
    return sizes


@pytest.mark.parametrize("lanes", [1, 4])
def test_concurrent_joins_commit_in_batches_in_arrival_order(make_event, monkeypatch) -> None:
    event = make_event(capacity=0)
    sizes = batch_sizes_counted(monkeypatch)
    hot = HotPaths(django_asgi_app)

    async def burst() -> list[Any]:
        return await asyncio.gather(
            *(
                asgi_call(
                    hot,
                    "POST",
                    f"/api/v1/events/{event.slug}/join",
                    body=b"{}",
                    headers={"idempotency-key": f"fan-{i}"},
                )
                for i in range(60)
            )
        )

    replies = asyncio.run(burst())
    assert [r.status for r in replies] == [201] * 60
    assert max(sizes) > 1  # joins that arrived during a commit shared the next one
    assert sum(sizes) == 60
    entries = {e.public_id: e for e in QueueEntry.objects.all()}
    assert len(entries) == 60
    positions = [r.body["position"] for r in replies]
    assert sorted(positions) == list(range(1, 61))
    if event.lanes == 1:
        # Answered in arrival order: order keys and positions follow the requests' order.
        assert positions == sorted(positions)
    else:
        # A batch commits lane by lane: joins that arrived together are ordered by lane
        # (none was answered before another began), and places follow the order keys.
        keys = {e.id: e.order_key for e in entries.values()}
        by_key = sorted(replies, key=lambda r: keys[ticket_read(r.body["ticket"]).entry_id])
        assert [r.body["position"] for r in by_key] == list(range(1, 61))
    assert audit_event_verify(event_id=event.id).ok


def test_a_failed_batch_tells_every_fan_the_room_is_briefly_unavailable(
    make_event, monkeypatch
) -> None:
    event = make_event(capacity=0)

    def broken(items: Any) -> Any:
        raise OperationalError("connection refused")

    monkeypatch.setattr(join_batcher, "join_batch", broken)
    reply = call(HotPaths(django_asgi_app), "POST", f"/api/v1/events/{event.slug}/join")
    assert reply.status == 503
    assert reply.body["error"] == "unavailable"
    assert reply.headers["retry-after"] == "5"


def test_one_fans_unexpected_failure_is_theirs_alone(make_event, monkeypatch) -> None:
    from queueing.web import api_fan

    event = make_event(capacity=0)
    real = api_fan.identity_from_request

    def fragile(request: Any, **how: Any) -> Any:
        if request.headers.get("X-Break") == "yes":
            raise RuntimeError("a bug for this request only")
        return real(request, **how)

    monkeypatch.setattr(api_fan, "identity_from_request", fragile)
    hot = HotPaths(django_asgi_app)
    path = f"/api/v1/events/{event.slug}/join"

    async def together() -> list[Any]:
        return await asyncio.gather(
            asgi_call(hot, "POST", path, body=b"{}", headers={"idempotency-key": "ok-1"}),
            asgi_call(hot, "POST", path, body=b"{}", headers={"x-break": "yes"}),
            asgi_call(hot, "POST", path, body=b"{}", headers={"idempotency-key": "ok-2"}),
        )

    replies = asyncio.run(together())
    assert [r.status for r in replies] == [201, 500, 201]
    assert replies[1].body["error"] == "internal_error"
    assert QueueEntry.objects.count() == 2


# Raw JSON bodies: "\ud800" is a lone surrogate once parsed (not UTF-8), "\u0000" a NUL;
# PostgreSQL can store neither.
_GOOD_JOIN = b'{"return": "https://shop.example/ok"}'
_BAD_JOINS = {
    "surrogate-return": (b'{"return": "https://shop.example/\\ud800"}', 201),
    "nul-return": (b'{"return": "https://shop.example/\\u0000"}', 201),
    "surrogate-code": (b'{"access_code": "A\\ud800"}', 400),
    "nul-code": (b'{"access_code": "A\\u0000"}', 400),
}


def test_one_bad_value_in_a_batch_of_joins_answers_only_its_own_join(
    make_event, monkeypatch
) -> None:
    # The probe's attack: a burst of good joins at a sale's start, and among them a few with
    # values PostgreSQL cannot store, sharing the good ones' batch.
    event = make_event(capacity=0)
    sizes = batch_sizes_counted(monkeypatch)
    hot = HotPaths(django_asgi_app)
    path = f"/api/v1/events/{event.slug}/join"
    sent = [(f"fan-{i}", _GOOD_JOIN, 201) for i in range(30)]
    sent += [(name, body, status) for name, (body, status) in _BAD_JOINS.items()]
    sent += [(f"fan-{i}", _GOOD_JOIN, 201) for i in range(30, 60)]

    async def burst() -> list[Any]:
        return await asyncio.gather(
            *(
                asgi_call(hot, "POST", path, body=body, headers={"idempotency-key": key})
                for key, body, _ in sent
            )
        )

    replies = asyncio.run(burst())
    assert max(sizes) > len(_BAD_JOINS)  # the bad joins shared a batch with good ones
    assert {key: r.status for (key, _, _), r in zip(sent, replies, strict=True)} == {
        key: status for key, _, status in sent
    }
    assert all(r.body["error"] == "bad_request" for r in replies if r.status == 400)
    urls = set(QueueEntry.objects.values_list("return_url", flat=True))
    assert urls == {"https://shop.example/ok", ""}  # the bad links dropped, never stored
    assert QueueEntry.objects.count() == 62
    assert audit_chain_verify(event_id=event.id).ok


def test_a_join_that_fails_in_its_batch_is_answered_alone_and_logged_with_its_traceback(
    make_event, monkeypatch, caplog
) -> None:
    from queueing.line import joining

    event = make_event(capacity=0)
    real_insert = joining.entries_insert

    def fragile(entries: list[QueueEntry], **how: Any) -> None:
        if any(entry.return_url == "https://shop.example/break" for entry in entries):
            raise RuntimeError("a bug for this join only")
        real_insert(entries, **how)

    monkeypatch.setattr(joining, "entries_insert", fragile)
    hot = HotPaths(django_asgi_app)
    path = f"/api/v1/events/{event.slug}/join"
    bodies = [b"{}"] * 10 + [b'{"return": "https://shop.example/break"}'] + [b"{}"] * 10

    async def burst() -> list[Any]:
        return await asyncio.gather(
            *(
                asgi_call(hot, "POST", path, body=body, headers={"idempotency-key": f"fan-{i}"})
                for i, body in enumerate(bodies)
            )
        )

    replies = asyncio.run(burst())
    assert [r.status for r in replies] == [201] * 10 + [500] + [201] * 10
    assert replies[10].body["error"] == "internal_error"
    assert QueueEntry.objects.count() == 20
    (logged,) = [r for r in caplog.records if r.name == "queueing.web.api_errors"]
    assert logged.exc_info is not None and logged.exc_info[0] is RuntimeError
    assert "a bug for this join only" in caplog.text
    assert "NoneType: None" not in caplog.text


def test_a_server_that_names_itself_with_a_list_is_served(make_event, hot) -> None:
    event = make_event(capacity=0)
    ticket = join(new_fan(), event.slug).json()["ticket"]

    async def as_daphne_would() -> Any:
        replies: list[Any] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            replies.append(message)

        scope = {
            "type": "http",
            "method": "GET",
            "scheme": "http",
            "path": f"/api/v1/tickets/{ticket}",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"testserver")],
            "server": ["testserver", 80],
            "client": ["127.0.0.1", 5000],
        }
        await hot(scope, receive, send)
        return replies[0]

    assert asyncio.run(as_daphne_would())["status"] == 200


def test_status_goes_to_django_when_the_layout_cannot_be_read(make_event, monkeypatch) -> None:
    from django.db import OperationalError

    event = make_event(capacity=0)
    ticket = join(new_fan(), event.slug).json()["ticket"]
    in_process.clear_all()

    def unreachable(event_id: int) -> Any:
        raise OperationalError("connection refused")

    monkeypatch.setattr(reads, "_read_layout", unreachable)
    went_to_django = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        went_to_django.append(scope["path"])
        await django_asgi_app(scope, receive, send)

    reply = call(HotPaths(inner), "GET", f"/api/v1/tickets/{ticket}")
    assert went_to_django
    assert reply.status == 200
