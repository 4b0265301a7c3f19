"""No request shape on /api/ produces a 500 or an HTML page, and none disturbs the line."""

from typing import Any

import pytest
from django.test import Client

from queueing.models import QueueEntry
from tests.helpers import join, new_fan

pytestmark = pytest.mark.django_db


def assert_json_error(response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) >= {"error", "detail"}
    if code:
        assert body["error"] == code


@pytest.mark.parametrize(
    "raw",
    [b"{", b"not json", b"[1, 2]", b'"string"', b"\xff\xfe\x00", b"null", b"123"],
)
def test_malformed_json_is_a_bad_request(event, raw: bytes) -> None:
    response = Client().post(
        f"/api/v1/events/{event.slug}/join", data=raw, content_type="application/json"
    )
    assert_json_error(response, 400, "bad_request")


@pytest.mark.parametrize(
    "body",
    [
        {"access_code": 123},
        {"access_code": ["A"]},
        {"access_code": {"x": 1}},
        {"access_code": True},
        {"access_code": "A\x00B"},
        {"access_code": "X" * 10_000},
    ],
)
def test_wrong_types_and_huge_fields_are_refused(event, body) -> None:
    response = join(new_fan(), event.slug, body)
    assert_json_error(response, 400)
    assert QueueEntry.objects.count() == 0


def test_a_huge_body_is_refused(event) -> None:
    response = Client().post(
        f"/api/v1/events/{event.slug}/join",
        data=b'{"access_code": "' + b"A" * 200_000 + b'"}',
        content_type="application/json",
    )
    assert_json_error(response, 400, "bad_request")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/events/%00/join",
        "/api/v1/events/%ff%fe/join",
        "/api/v1/events/%E2%80%AE/join",
        "/api/v1/events/" + "a" * 5000 + "/join",
        "/api/v1/events/..%2f..%2fetc/join",
        "/api/v1/events/demo%0d%0aSet-Cookie:x/join",
    ],
)
def test_odd_bytes_in_event_paths_are_404(db, path: str) -> None:
    assert_json_error(Client().post(path, content_type="application/json"), 404)
    assert_json_error(Client().get(path.removesuffix("/join")), 404)


@pytest.mark.parametrize(
    "ticket",
    ["%00", "%ff%fe", "a" * 5000, "1-1-1.", ".sig", "1-1-1.AAAA", "%E2%80%AE.x", "null"],
)
def test_odd_tickets_are_invalid(db, ticket: str) -> None:
    assert_json_error(Client().get(f"/api/v1/tickets/{ticket}"), 400, "invalid_ticket")
    assert_json_error(Client().delete(f"/api/v1/tickets/{ticket}"), 400, "invalid_ticket")


def test_a_bad_idempotency_key_is_refused(event) -> None:
    response = join(Client(), event.slug, **{"Idempotency-Key": "x" * 300})
    assert_json_error(response, 400, "bad_request")


def test_unknown_api_paths_and_methods_answer_in_json(event) -> None:
    assert_json_error(Client().get("/api/v1/nothing-here"), 404)
    assert_json_error(Client().put(f"/api/v1/events/{event.slug}/join"), 405)
    response = Client().get(f"/api/v1/events/{event.slug}/join")
    assert_json_error(response, 405)
    assert response["Allow"] == "POST"


def test_a_bad_host_header_is_json_under_api(event) -> None:
    response = Client().get(f"/api/v1/events/{event.slug}", headers={"host": "evil.example"})
    assert_json_error(response, 400)


def test_bad_input_does_not_disturb_the_line(event) -> None:
    tickets = [join(new_fan(), event.slug).json()["ticket"] for _ in range(3)]
    for raw in (b"{", b"[]", b"\xff"):
        Client().post(
            f"/api/v1/events/{event.slug}/join", data=raw, content_type="application/json"
        )
    Client().delete(f"/api/v1/tickets/{tickets[0][:-2]}")
    positions = [Client().get(f"/api/v1/tickets/{t}").json()["position"] for t in tickets]
    assert positions == [1, 2, 3]


@pytest.mark.parametrize("depth", [1500, 100_000])
def test_json_nested_too_deep_is_a_bad_request(event, depth: int) -> None:
    for path in (f"/api/v1/events/{event.slug}/join", "/api/v1/passes/verify"):
        response = Client().post(path, data=b"[" * depth, content_type="application/json")
        assert_json_error(response, 400, "bad_request")


def test_non_ascii_passes_and_tickets_are_judged_not_crashed(event) -> None:
    body = b'{"pass": "\\ud800"}'
    response = Client().post("/api/v1/passes/verify", data=body, content_type="application/json")
    assert response.json() == {"valid": False, "reason": "malformed"}
    response = Client().post(
        "/api/v1/passes/complete",
        data=body,
        content_type="application/json",
        headers={"Authorization": "Bearer x"},
    )
    assert_json_error(response, 400, "bad_request")
    assert_json_error(Client().get("/api/v1/tickets/%C3%A9.abc"), 400, "invalid_ticket")


def test_a_non_ascii_proof_of_work_nonce_is_refused_not_crashed(make_event) -> None:
    event = make_event(slug="pow", pow_difficulty=4)
    challenge = Client().get(f"/api/v1/events/{event.slug}/challenge").json()["challenge"]
    # A lone surrogate, as JSON escapes allow: not representable in UTF-8.
    body = b'{"pow": {"challenge": "' + challenge.encode() + b'", "nonce": "\\ud800"}}'
    response = Client().post(
        f"/api/v1/events/{event.slug}/join", data=body, content_type="application/json"
    )
    assert_json_error(response, 400, "pow_invalid")


def test_looking_at_the_waiting_page_does_not_join(event) -> None:
    assert Client().get(f"/e/{event.slug}/").status_code == 200
    assert Client().head(f"/e/{event.slug}/").status_code == 200
    assert QueueEntry.objects.count() == 0
    Client().post(f"/e/{event.slug}/")
    assert QueueEntry.objects.count() == 1


# As raw JSON: "\ud800" is a lone surrogate once parsed, "\u0000" a NUL; PostgreSQL can store
# neither, and a value it refuses must never reach it.
UNSTORABLE_ESCAPES = ["\\u0000", "\\ud800", "\\udfff", "a\\ud800b"]


def _raw_join(slug: str, field: str, escaped: str) -> Any:
    body = f'{{"{field}": "{escaped}"}}'.encode()
    return Client().post(f"/api/v1/events/{slug}/join", data=body, content_type="application/json")


@pytest.mark.parametrize("escaped", UNSTORABLE_ESCAPES)
def test_an_access_code_postgresql_cannot_store_is_refused(event, escaped: str) -> None:
    assert_json_error(_raw_join(event.slug, "access_code", escaped), 400, "bad_request")
    assert QueueEntry.objects.count() == 0


@pytest.mark.parametrize("escaped", UNSTORABLE_ESCAPES)
def test_a_return_link_postgresql_cannot_store_is_dropped(event, escaped: str) -> None:
    response = _raw_join(event.slug, "return", f"https://shop.example/{escaped}")
    assert response.status_code == 201, response.content
    assert QueueEntry.objects.get().return_url == ""


@pytest.mark.parametrize("escaped", UNSTORABLE_ESCAPES)
def test_a_shops_event_or_outcome_postgresql_cannot_store_is_refused(event, escaped) -> None:
    key = {"Authorization": "Bearer k"}
    for path, field, headers in [
        ("/api/v1/passes/verify", "event", {}),
        ("/api/v1/passes/complete", "outcome", key),
    ]:
        body = f'{{"pass": "x", "{field}": "{escaped}"}}'.encode()
        response = Client().post(path, data=body, content_type="application/json", headers=headers)
        assert_json_error(response, 400, "bad_request")


def test_a_nul_in_the_waiting_pages_form_or_query_is_a_bad_request_not_a_crash(event) -> None:
    page = f"/e/{event.slug}/"
    assert Client().post(page, {"return": "https://shop.example/a\x00b"}).status_code == 400
    assert Client().post(page, {"access_code": "A\x00"}).status_code == 400
    assert Client().get(page, {"return": "https://shop.example/a\x00b"}).status_code == 400
    form = "return=https%3A%2F%2Fshop.example%2Fa%00b"
    encoded = Client().post(page, form, content_type="application/x-www-form-urlencoded")
    assert encoded.status_code == 400
    assert QueueEntry.objects.count() == 0
    # The same link without it is kept as ever.
    assert Client().post(page, {"return": "https://shop.example/ab"}).status_code == 302
    assert QueueEntry.objects.get().return_url == "https://shop.example/ab"


def test_a_nul_in_a_query_nothing_reads_is_ignored_on_the_api_and_the_gate(event) -> None:
    assert Client().get(f"/api/v1/events/{event.slug}", QUERY_STRING="x=%00").status_code == 200
    # The web server asking the gate knows only 204 and 401.
    gate = Client().get(f"/gate/{event.slug}/check", QUERY_STRING="x=%00")
    assert gate.status_code == 401
