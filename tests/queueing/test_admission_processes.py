"""Admission with the real processes: gunicorn + uvicorn, Celery worker and beat."""

from __future__ import annotations

import re
import time
import urllib.parse
from datetime import timedelta

import pytest
from django.utils import timezone

from queueing.models import QueueEntry
from queueing.rules.ticket_codec import ticket_read
from tests.http import pass_complete, request
from tests.processes import running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def status_of(base: str, ticket: str) -> dict:
    return request("GET", f"{base}/api/v1/tickets/{ticket}").body


def test_capacity_completion_and_expiry_with_worker_and_beat(make_event) -> None:
    event = make_event(capacity=3, rate_per_minute=0)
    with running_stack() as stack:
        base = stack.web()
        tickets = [
            request("POST", f"{base}/api/v1/events/{event.slug}/join", {}).body["ticket"]
            for _ in range(10)
        ]
        stack.worker()
        stack.beat()

        def admitted() -> list[bool]:
            return [status_of(base, t)["status"] == "admitted" for t in tickets]

        wait_until(lambda: sum(admitted()) == 3, timeout=20, what="the first admissions")
        time.sleep(2)  # a few more ticks: still exactly the first three
        assert admitted() == [True] * 3 + [False] * 7
        passes = [status_of(base, t)["pass"] for t in tickets[:3]]

        completed_at = time.monotonic()
        for token in passes[:2]:
            pass_complete(base, event.integration_key, token)
        wait_until(
            lambda: sum(admitted()) == 3 and admitted()[3:5] == [True, True],
            timeout=3,
            what="the next two fans to be let in",
        )
        assert time.monotonic() - completed_at <= 3
        assert admitted() == [False, False, True, True, True] + [False] * 5

        # The third fan's session runs out: its slot goes to the sixth fan.
        QueueEntry.objects.filter(public_id=_public_id(tickets[2])).update(
            pass_expires_at=timezone.now() - timedelta(seconds=1)
        )
        wait_until(lambda: admitted()[5], timeout=5, what="the expired slot to be reused")
        assert status_of(base, tickets[2])["status"] == "expired"
        assert sum(admitted()) == 3


def _public_id(ticket: str):
    return QueueEntry.objects.get(pk=ticket_read(ticket).entry_id).public_id


def test_the_whole_journey_ends_in_the_demo_shop(make_event) -> None:
    with running_stack() as stack:
        base = stack.web_at_public_url()
        make_event(slug="demo", capacity=1, rate_per_minute=0, target_url=f"{base}/shop/demo/")
        stack.worker()
        stack.beat()
        ticket = request("POST", f"{base}/api/v1/events/demo/join", {}).body["ticket"]
        body = wait_until(
            lambda: (s := status_of(base, ticket))["status"] == "admitted" and s,
            timeout=20,
            what="admission",
        )
        assert body["redirect_url"].startswith(f"{base}/shop/demo/?wr_pass=")
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with opener.open(body["redirect_url"], timeout=10) as page:
            html = page.read().decode()
        assert "verified offline" in html
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
        form = urllib.parse.urlencode(
            {"csrfmiddlewaretoken": csrf, "wr_pass": body["pass"], "outcome": "completed"}
        ).encode()
        with opener.open(
            urllib.request.Request(
                f"{base}/shop/demo/complete",
                data=form,
                headers={"Referer": body["redirect_url"]},
            ),
            timeout=10,
        ) as done:
            assert "Thank you for your order" in done.read().decode()
        assert status_of(base, ticket)["status"] == "completed"
        verdict = request("POST", f"{base}/api/v1/passes/verify", {"pass": body["pass"]}).body
        assert verdict == {"valid": False, "reason": "completed"}
