"""The request id: taken when well formed, made otherwise, answered, kept with the join, and
followed into the worker that admits the fan."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from queueing.models import QueueEntry
from queueing.rules.ticket_codec import ticket_read
from queueing.web.request_ids import request_id_new, request_id_valid
from tests.http import request
from tests.processes import running_stack, wait_until


@pytest.mark.parametrize(
    "raw",
    ["0123456789abcdef0123456789abcdef", "3f2b8c1e-6a7d-4e0f-9b1a-2c3d4e5f6a7b", "lb:1.2.3-x_y"],
)
def test_well_formed_ids_are_kept(raw: str) -> None:
    assert request_id_valid(raw) == raw
    assert request_id_valid(raw.encode()) == raw


@pytest.mark.parametrize(
    "raw", ["", "short", "x" * 65, "has space inside", 'quote"d-0123', "new\nline-0123", "é" * 10]
)
def test_ill_formed_ids_are_refused(raw: str) -> None:
    assert request_id_valid(raw) is None


def test_a_new_id_is_well_formed_and_new() -> None:
    assert request_id_valid(request_id_new()) is not None
    assert request_id_new() != request_id_new()


@pytest.mark.django_db
def test_django_answers_the_incoming_id_or_its_own(event) -> None:
    client = Client()
    sent = client.get(f"/api/v1/events/{event.slug}", HTTP_X_REQUEST_ID="abcdef0123456789")
    assert sent["X-Request-ID"] == "abcdef0123456789"
    forged = client.get(f"/api/v1/events/{event.slug}", HTTP_X_REQUEST_ID="bad id\r\n")
    assert request_id_valid(forged["X-Request-ID"]) is not None


@pytest.mark.django_db
def test_a_join_through_django_keeps_its_request_id_with_the_entry(event) -> None:
    client = Client()
    client.post(
        f"/api/v1/events/{event.slug}/join",
        {},
        content_type="application/json",
        HTTP_X_REQUEST_ID="page-join-0001",
    )
    assert QueueEntry.objects.get(event=event).join_request_id == "page-join-0001"


def _json_lines(text: str) -> list[dict]:
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_joins_request_id_is_in_the_web_and_the_worker_logs(make_event) -> None:
    event = make_event(capacity=5, rate_per_minute=0)
    # Celery warns of running as root (this machine's tests do; the image's user is not) on
    # stderr before any logging is set up.
    quiet_root = "ignore:You're running the worker with superuser privileges"
    with running_stack(LOG_FORMAT="json", DJANGO_DEBUG="1", PYTHONWARNINGS=quiet_root) as stack:
        base = stack.web()
        join_id = "join-trace-" + request_id_new()[:16]
        reply = request(
            "POST", f"{base}/api/v1/events/{event.slug}/join", {}, {"X-Request-ID": join_id}
        )
        assert reply.status == 201, reply
        assert reply.headers["x-request-id"] == join_id
        # The lean status path answers its own when none came, well formed.
        poll = request("GET", f"{base}/api/v1/tickets/{reply.body['ticket']}")
        assert (
            request_id_valid(poll.headers["x-request-id"])
            and poll.headers["x-request-id"] != join_id
        )
        entry = QueueEntry.objects.get(pk=ticket_read(reply.body["ticket"]).entry_id)
        assert entry.join_request_id == join_id

        stack.worker()
        stack.beat()

        def admitted_line() -> dict | None:
            for line in _json_lines(stack.log("worker")):
                if line.get("message") == "admitted":
                    return line
            return None

        line = wait_until(admitted_line, timeout=30, what="the admission's log line")
        assert {"ticket": str(entry.public_id), "join_request_id": join_id} in line["admitted"]
        assert line["logger"] == "queueing.line.admission" and line["level"] == "INFO"
        # Every line of each process is one JSON object.
        for name in ("web", "worker", "beat"):
            text = stack.log(name)
            assert text.strip(), name
            for raw in text.splitlines():
                assert isinstance(json.loads(raw), dict), (name, raw)
        web_lines = _json_lines(stack.log("web"))
        assert all({"time", "level", "logger", "message"} <= set(line) for line in web_lines)
        # No line per request (nginx's access log is the room's): not even the polls'.
        assert not [line for line in web_lines if "/api/v1/" in line["message"]], web_lines
        joined = [line for line in web_lines if line["message"] == "joined"]
        assert any(join_id in line["request_ids"] for line in joined), joined
