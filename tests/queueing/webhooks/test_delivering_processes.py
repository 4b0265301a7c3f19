"""A webhook delivered by the real processes: staff pause an on-sale through the web server,
the Celery worker's first attempt gets a 500, the second times out, the beat's sweep has the
third made, which the receiver accepts, once, with a signature it verifies."""

from __future__ import annotations

import json

import pytest

from queueing.models import WebhookDelivery
from staff.webhooks import endpoint_create
from tests.helpers import EDITOR, staff_token
from tests.http import request
from tests.processes import running_stack, wait_until
from tests.webhook_receiver import verify, webhook_receiver

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def test_delivered_after_a_500_and_a_timeout_with_a_valid_signature(make_event, settings) -> None:
    event = make_event(slug="tour")
    token = staff_token("ann", *EDITOR)
    with webhook_receiver([500, "hang", 200], hang_seconds=3) as receiver:
        made = endpoint_create(
            url=receiver.url,
            types=["onsale.paused"],
            event=event,
            actor="staff:ann",
            now=event.created_at,
        )
        with running_stack(
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY="webhooks-test-0123456789-abcdefghijklmnopqrstuvwxyz",
            DJANGO_ALLOWED_HOSTS="127.0.0.1",
            DJANGO_SSL_REDIRECT="0",
            WR_WEBHOOK_ALLOW_HTTP="1",
            WR_WEBHOOK_ALLOWED_NETWORKS="127.0.0.1/32",
            WR_WEBHOOK_TIMEOUT_SECONDS="1",
            WR_WEBHOOK_RETRY_SECONDS="1",
            WR_WEBHOOK_SWEEP_SECONDS="0.5",
        ) as stack:
            base = stack.web()
            stack.worker()
            stack.beat()
            paused = request(
                "POST",
                f"{base}/api/v1/manage/events/tour/pause",
                headers={"Authorization": f"Token {token}"},
            )
            assert paused.status == 200, paused.body
            wait_until(
                lambda: WebhookDelivery.objects.filter(state="delivered").exists(),
                timeout=30,
                what="the delivery",
            )
    delivery = WebhookDelivery.objects.get()
    assert delivery.attempts == 3
    tries = list(delivery.tries.values_list("status_code", "error"))
    assert tries[0] == (500, "answered 500")
    assert tries[1][0] is None and "timed out" in tries[1][1]
    assert tries[2] == (200, "")
    assert [r.answered for r in receiver.got] == [500, "hang", 200]
    accepted = receiver.got[-1]
    assert verify(made.secret, accepted.headers, accepted.body)
    body = json.loads(accepted.body)
    assert (body["id"], body["type"], body["event"]["slug"]) == (
        str(delivery.public_id),
        "onsale.paused",
        "tour",
    )
    assert body["data"] == {"by": "staff:ann"}
