"""Safety net with the real processes: gunicorn + uvicorn (the lean join path), a Celery
worker and beat."""

from __future__ import annotations

import pytest

from tests.http import pass_complete, request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def test_a_safety_net_join_on_an_empty_line_comes_back_admitted_with_a_valid_pass(
    make_event,
) -> None:
    event = make_event(slug="net", mode="safety_net", capacity=2, rate_per_minute=0)
    with running_stack() as stack:
        base = stack.web()
        stack.worker()
        stack.beat()
        # No wait for the beat: the line started with the on-sale.
        joined = request("POST", f"{base}/api/v1/events/net/join", {})
        assert joined.status == 201
        body = joined.body
        assert body["status"] == "admitted"
        assert body["redirect_url"] == f"https://shop.example/checkout?wr_pass={body['pass']}"
        verdict = request(
            "POST", f"{base}/api/v1/passes/verify", {"pass": body["pass"], "event": "net"}
        )
        assert verdict.status == 200
        assert verdict.body["valid"] is True
        polled = request("GET", f"{base}/api/v1/tickets/{body['ticket']}").body
        assert (polled["status"], polled["pass"]) == ("admitted", body["pass"])

        # Under load the line forms: the shop full, the next fan queues, and the worker lets
        # them in as soon as a place is freed.
        second = request("POST", f"{base}/api/v1/events/net/join", {}).body
        third = request("POST", f"{base}/api/v1/events/net/join", {}).body
        assert (second["status"], third["status"], third["position"]) == ("admitted", "waiting", 1)
        pass_complete(base, event.integration_key, body["pass"])
        wait_until(
            lambda: (
                request("GET", f"{base}/api/v1/tickets/{third['ticket']}").body["status"]
                == "admitted"
            ),
            timeout=10,
            what="the waiting fan to be let in",
        )
