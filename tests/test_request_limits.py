"""What the room refuses to read (queueing/web/request_limits.py, ApiErrorMiddleware): too
many query fields, a body over the limit, declared or sent chunked, is ``400 bad_request``
in the API's JSON everywhere under /api/ (Django views, DRF views, the lean paths), never a
500; a chunked body is cut at the limit, not read whole; a chunked body within it is read
like any other."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.test import Client, RequestFactory

from config.asgi import application
from events.models import LOGO_MAX_BYTES, Event
from queueing.models import QueueEntry
from queueing.web.api_errors import drf_exception_handler
from queueing.web.middleware import ApiErrorMiddleware
from tests.asgi import AsgiReply, call
from tests.helpers import join, new_fan, staff_client, staff_token

LIMIT = 64 * 1024
CHUNK = 8 * 1024
# The most body messages an app behind the limit may ask for: the one crossing it is the last.
MOST_CHUNKS_READ = LIMIT // CHUNK + 1
# Allowed to read, add and change on-sales: what is refused here is the request, not the user.
STAFF_RIGHTS = ("view_event", "add_event", "change_event")


def _fields(count: int) -> str:
    return "&".join(f"f{i}=1" for i in range(count))


def _assert_bad_request(status: int, content_type: str, body: Any) -> None:
    assert status == 400, body
    assert content_type.startswith("application/json")
    assert body["error"] == "bad_request"
    assert body["detail"]


@pytest.fixture
def staff() -> Client:
    return staff_client("ann", *STAFF_RIGHTS, token=True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/manage/events/"),
        ("get", "/api/v1/audit/records/"),
        ("get", "/api/schema/"),
        ("get", "/api/v1/events/onsale"),
        ("post", "/api/v1/events/onsale/join"),
        ("get", "/api/v1/tickets/1-1-1.x"),
        ("post", "/api/v1/passes/verify"),
    ],
)
def test_too_many_query_fields_are_a_bad_request_everywhere_under_api(
    event, staff, method, path
) -> None:
    response = getattr(staff, method)(f"{path}?{_fields(1001)}")
    _assert_bad_request(response.status_code, response["Content-Type"], response.json())
    assert "query" in response.json()["detail"]


@pytest.mark.django_db
def test_as_many_query_fields_as_django_reads_are_fine(staff) -> None:
    assert staff.get(f"/api/v1/manage/events/?{_fields(1000)}").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["post", "patch"])
def test_a_body_over_the_limit_is_a_bad_request_on_the_staff_api(event, staff, method) -> None:
    path = "/api/v1/manage/events/" if method == "post" else f"/api/v1/manage/events/{event.slug}/"
    body = {"slug": "tour", "name": "x" * 70_000, "target_url": "https://shop.example/"}
    response = getattr(staff, method)(path, json.dumps(body), content_type="application/json")
    _assert_bad_request(response.status_code, response["Content-Type"], response.json())
    assert list(Event.objects.values_list("slug", flat=True)) == [event.slug]


@pytest.mark.django_db
@pytest.mark.parametrize("length", ["12abc", "-1", "1,1", " "])
def test_a_content_length_that_is_not_a_length_is_a_bad_request(event, length) -> None:
    response = Client().post(
        "/api/v1/passes/verify", b'{"pass": "x"}', "application/json", CONTENT_LENGTH=length
    )
    _assert_bad_request(response.status_code, response["Content-Type"], response.json())


def test_what_django_refuses_to_read_is_a_bad_request_in_drf_and_the_middleware() -> None:
    # The checks before the views leave nothing for these two to see today; they stay as the
    # answer should Django refuse something those checks do not know of.
    refused = drf_exception_handler(TooManyFieldsSent("too many"), {})
    assert refused is not None
    assert (refused.status_code, refused.data["error"]) == (400, "bad_request")
    request = RequestFactory().post("/api/v1/manage/events/")
    answer = ApiErrorMiddleware(lambda r: None).process_exception(request, RequestDataTooBig())
    assert answer is not None
    _assert_bad_request(answer.status_code, answer["Content-Type"], json.loads(answer.content))


# --- the real ASGI application: bodies sent chunked (no Content-Length), the lean paths ---


def _chunked(path: str, body: bytes, **headers: str) -> AsgiReply:
    chunks = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]
    return call(
        application,
        "POST",
        path,
        chunks=chunks,
        headers={"content-type": "application/json", "transfer-encoding": "chunked", **headers},
    )


def _huge_json() -> bytes:
    return json.dumps({"slug": "tour", "name": "x" * 1_000_000}).encode()


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_over_the_limit_is_cut_there_on_the_staff_api() -> None:
    reply = _chunked(
        "/api/v1/manage/events/",
        _huge_json(),
        authorization=f"Token {staff_token('ann', *STAFF_RIGHTS)}",
    )
    _assert_bad_request(reply.status, reply.headers["content-type"], reply.body)
    assert reply.headers["x-frame-options"] == "DENY"  # the security headers, as Django's
    assert reply.chunks_read == MOST_CHUNKS_READ  # of 123: the rest was never read
    assert not Event.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/api/v1/events/onsale/join", "/api/v1/passes/verify"])
def test_a_chunked_body_over_the_limit_is_cut_there_on_the_fans_and_shops_api(
    make_event, path
) -> None:
    make_event()
    reply = _chunked(path, _huge_json())
    _assert_bad_request(reply.status, reply.headers["content-type"], reply.body)
    assert reply.chunks_read == MOST_CHUNKS_READ
    assert not QueueEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_over_the_limit_is_cut_there_on_pages_too(make_event) -> None:
    event = make_event()
    reply = _chunked(f"/e/{event.slug}/", b"access_code=" + b"A" * 1_000_000)
    assert reply.status == 400
    assert reply.headers["content-type"].startswith("text/plain")
    assert reply.chunks_read == MOST_CHUNKS_READ
    assert not QueueEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_read() -> None:
    reply = call(
        application,
        "POST",
        "/api/v1/manage/events/",
        chunks=[b"{}"] * 200,
        headers={"content-type": "application/json", "content-length": str(LIMIT + 1)},
    )
    _assert_bad_request(reply.status, reply.headers["content-type"], reply.body)
    assert reply.chunks_read == 0


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_within_the_limit_is_read_like_any_other(make_event) -> None:
    token = staff_token("ann", *STAFF_RIGHTS)
    body = {"slug": "tour", "name": "The Tour", "target_url": "https://shop.example/"}
    created = _chunked(
        "/api/v1/manage/events/", json.dumps(body).encode(), authorization=f"Token {token}"
    )
    assert created.status == 201, created.body
    assert created.body["name"] == "The Tour"
    refused = _chunked("/api/v1/manage/events/", b"{nope", authorization=f"Token {token}")
    _assert_bad_request(refused.status, refused.headers["content-type"], refused.body)
    joined = _chunked("/api/v1/events/tour/join", b'{"access_code": ' + b'"x"}')
    assert joined.status == 400 and joined.body["error"] == "invalid_access_code"


@pytest.mark.django_db(transaction=True)
def test_too_many_query_fields_are_a_bad_request_on_the_lean_paths(make_event) -> None:
    event = make_event(capacity=0)
    ticket = join(new_fan(), event.slug).json()["ticket"]
    assert call(application, "GET", f"/api/v1/tickets/{ticket}").status == 200  # lean
    for method, path in (
        ("GET", f"/api/v1/tickets/{ticket}"),
        ("POST", f"/api/v1/events/{event.slug}/join"),
    ):
        reply = call(application, method, path, body=b"{}", query=_fields(1001))
        _assert_bad_request(reply.status, reply.headers["content-type"], reply.body)
    assert QueueEntry.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_admin_may_be_sent_a_logo_as_large_as_it_allows(make_event) -> None:
    """An on-sale's logo may be 256 KiB: a form carrying one reaches Django's admin (here its
    CSRF check, which refuses this bare form), sent chunked or declared, while the same body
    elsewhere is still refused, and the admin's own limit holds past that."""
    event = make_event()
    boundary = "wr-boundary"
    logo = b"\x89PNG\r\n\x1a\n" + b"\x00" * (LOGO_MAX_BYTES - 16)
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="logo"; filename="logo.png"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + logo
        + f"\r\n--{boundary}--\r\n".encode()
    )
    form = {"content-type": f"multipart/form-data; boundary={boundary}"}
    admin = f"/admin/events/event/{event.pk}/change/"
    for headers in ({**form, "content-length": str(len(body))}, form):
        reply = call(application, "POST", admin, body=body, headers=headers)
        assert reply.status == 403 and b"CSRF" in reply.raw, reply.raw[:200]
    assert _chunked(f"/e/{event.slug}/", body, **form).status == 400
    too_much = body + b"\x00" * (LIMIT + 16 * 1024)
    reply = call(application, "POST", admin, body=too_much, headers=form)
    assert reply.status == 400 and reply.headers["content-type"].startswith("text/plain")
