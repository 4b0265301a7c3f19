"""No request shape on /api/ produces a 500 or an HTML page, and none disturbs the line."""

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
