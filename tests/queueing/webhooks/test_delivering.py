"""Webhook attempts against a real HTTP receiver, made in the test process: the signature a
receiver checks, retries and their backoff, the claim, turning a failing endpoint off, and
the addresses the room refuses to call."""

from __future__ import annotations

import ipaddress
import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from queueing.models import WebhookDelivery, WebhookDeliveryState, WebhookEndpoint
from queueing.webhooks.delivering import deliveries_sweep, delivery_attempt
from queueing.webhooks.emitting import webhook_emit
from staff.webhooks import endpoint_create, endpoint_rotate_secret, endpoint_update
from tests.edge import self_signed_certificate
from tests.processes import ROOT
from tests.webhook_receiver import verify, webhook_receiver

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def loopback_allowed(settings):
    settings.WR_WEBHOOK_ALLOW_HTTP = True
    settings.WR_WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.0/8")]
    settings.WR_WEBHOOK_TIMEOUT_SECONDS = 0.5
    settings.WR_WEBHOOK_RETRY_SECONDS = 10
    settings.WR_WEBHOOK_ATTEMPTS = 4


def _told(event, url: str, **fields):
    now = timezone.now()
    made = endpoint_create(url=url, types=["onsale.paused"], actor="x", now=now, **fields)
    webhook_emit(event=event, type="onsale.paused", now=now, data={"by": "staff:ann"})
    return made, WebhookDelivery.objects.get(endpoint=made.endpoint)


def test_a_500_then_a_timeout_then_delivered_signed(event) -> None:
    with webhook_receiver([500, "hang", 200], hang_seconds=1.5) as receiver:
        made, delivery = _told(event, receiver.url)
        now = timezone.now()
        assert delivery_attempt(delivery_id=delivery.id, now=now) == "retry"
        delivery.refresh_from_db()
        # The next is due after the first wait (10 s here), not before.
        assert delivery.due_at >= now + timedelta(seconds=10)
        assert delivery_attempt(delivery_id=delivery.id, now=now + timedelta(seconds=5)) is None
        later = now + timedelta(seconds=11)
        assert delivery_attempt(delivery_id=delivery.id, now=later) == "retry"
        delivery.refresh_from_db()
        assert delivery.due_at >= later + timedelta(seconds=20)  # twice as long
        last = later + timedelta(seconds=21)
        assert delivery_attempt(delivery_id=delivery.id, now=last) == "delivered"
        assert delivery_attempt(delivery_id=delivery.id, now=last) is None  # done: never again
    assert [r.answered for r in receiver.got] == [500, "hang", 200]
    delivery.refresh_from_db()
    assert delivery.state == WebhookDeliveryState.DELIVERED
    tries = list(delivery.tries.values_list("number", "status_code", "error"))
    assert tries[0] == (1, 500, "answered 500")
    assert tries[1][:2] == (2, None) and "timed out" in tries[1][2]
    assert tries[2] == (3, 200, "")
    accepted = receiver.got[2]
    assert accepted.path == "/hooks/room"
    headers = accepted.headers
    assert headers["x-waitingroom-webhook-id"] == str(delivery.public_id)
    assert headers["x-waitingroom-webhook-timestamp"] == str(int(last.timestamp()))
    assert verify(made.secret, headers, accepted.body, now=last.timestamp())
    body = json.loads(accepted.body)
    assert body["id"] == str(delivery.public_id)
    assert (body["type"], body["event"]["slug"], body["data"]) == (
        "onsale.paused",
        event.slug,
        {"by": "staff:ann"},
    )
    # Every attempt sent the same bytes.
    assert len({r.body for r in receiver.got}) == 1
    assert WebhookEndpoint.objects.get().failures_in_a_row == 0


def test_every_attempt_failing_gives_up_after_the_last(event) -> None:
    with webhook_receiver([503]) as receiver:
        _, delivery = _told(event, receiver.url)
        now = timezone.now()
        outcomes = []
        for _ in range(4):
            now += timedelta(days=1)
            outcomes.append(delivery_attempt(delivery_id=delivery.id, now=now))
    assert outcomes == ["retry", "retry", "retry", "failed"]
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("failed", 4)
    assert len(receiver.got) == 4


def test_an_endpoint_failing_in_a_row_is_turned_off_and_its_deliveries_cancelled(
    event, settings
) -> None:
    settings.WR_WEBHOOK_DISABLE_AFTER = 2
    with webhook_receiver([500]) as receiver:
        _, first = _told(event, receiver.url)
        webhook_emit(event=event, type="onsale.paused", now=timezone.now())
        now = timezone.now()
        assert delivery_attempt(delivery_id=first.id, now=now) == "retry"
        assert delivery_attempt(delivery_id=first.id, now=now + timedelta(hours=1)) == "retry"
    endpoint = WebhookEndpoint.objects.get()
    assert not endpoint.enabled
    assert "2 failed attempts in a row" in endpoint.disabled_reason
    assert "answered 500" in endpoint.disabled_reason
    assert set(WebhookDelivery.objects.values_list("state", flat=True)) == {"cancelled"}
    assert deliveries_sweep(now=now + timedelta(days=2)) == []
    # Turned on again by staff: the count starts over, the reason goes, nothing old is sent.
    endpoint = endpoint_update(endpoint=endpoint, changes={"enabled": True})
    assert (endpoint.failures_in_a_row, endpoint.disabled_reason) == (0, "")
    assert deliveries_sweep(now=now + timedelta(days=2)) == []


def test_the_sweep_asks_for_what_is_due_only(event) -> None:
    with webhook_receiver([200]) as receiver:
        _, delivery = _told(event, receiver.url)
    now = timezone.now()
    assert deliveries_sweep(now=now) == [delivery.id]
    WebhookDelivery.objects.update(due_at=now + timedelta(minutes=1))
    assert deliveries_sweep(now=now) == []


def test_a_private_address_is_refused_before_connecting(event, settings) -> None:
    with webhook_receiver([200]) as receiver:
        # Registered while allowed; the rule is judged again at every attempt, on the
        # addresses the name resolves to then.
        _, delivery = _told(event, receiver.url.replace("127.0.0.1", "localhost"))
        settings.WR_WEBHOOK_ALLOWED_NETWORKS = []
        assert delivery_attempt(delivery_id=delivery.id, now=timezone.now()) == "retry"
    assert receiver.got == []
    error = delivery.tries.get().error
    assert error.startswith("refused:") and "not a public address" in error


def test_a_rotated_secret_signs_beside_the_old_one_for_a_day(event) -> None:
    with webhook_receiver([200]) as receiver:
        made, _ = _told(event, receiver.url)
        now = timezone.now()
        rotated = endpoint_rotate_secret(endpoint=made.endpoint, now=now)
        webhook_emit(event=event, type="onsale.paused", now=now)
        newest = WebhookDelivery.objects.order_by("-id").first()
        assert delivery_attempt(delivery_id=newest.id, now=now) == "delivered"
        WebhookDelivery.objects.filter(pk=newest.pk).update(state="pending", due_at=now)
        WebhookDelivery.objects.filter(pk=newest.pk).update(attempts=5)
        a_day_later = now + timedelta(hours=25)
        assert delivery_attempt(delivery_id=newest.id, now=a_day_later) == "delivered"
    first, second = receiver.got
    assert first.headers["x-waitingroom-webhook-signature"].count("v1=") == 2
    assert verify(made.secret, first.headers, first.body, now=now.timestamp())
    assert verify(rotated.secret, first.headers, first.body, now=now.timestamp())
    assert second.headers["x-waitingroom-webhook-signature"].count("v1=") == 1
    assert not verify(made.secret, second.headers, second.body, now=a_day_later.timestamp())


def _documented_check():
    """The verification snippet of docs/api.md ("Verifying the signature"), run as written."""
    text = (ROOT / "docs" / "api.md").read_text()
    section = text[text.index("### Verifying the signature") :]
    code = section[section.index("```python") + len("```python") : section.index("```\n", 10)]
    scope: dict = {}
    exec(code, scope)  # our own documentation, run as a receiver would copy it
    return scope["webhook_verified"]


def test_the_documented_snippet_verifies_a_real_delivery(event) -> None:
    webhook_verified = _documented_check()
    with webhook_receiver([200]) as receiver:
        made, delivery = _told(event, receiver.url)
        assert delivery_attempt(delivery_id=delivery.id, now=timezone.now()) == "delivered"
    got = receiver.got[0]
    headers = {
        "X-Waitingroom-Webhook-Timestamp": got.headers["x-waitingroom-webhook-timestamp"],
        "X-Waitingroom-Webhook-Signature": got.headers["x-waitingroom-webhook-signature"],
    }
    assert webhook_verified(made.secret, headers, got.body)
    assert not webhook_verified("whsec_wrong", headers, got.body)
    assert not webhook_verified(made.secret, headers, got.body + b"\n")
    stale = {**headers, "X-Waitingroom-Webhook-Timestamp": str(int(time.time()) - 301)}
    assert not webhook_verified(made.secret, stale, got.body)


def test_over_https_the_pinned_connection_still_checks_the_hosts_certificate(
    event, tmp_path, monkeypatch
) -> None:
    certificate = self_signed_certificate(tmp_path)
    with webhook_receiver([200], tls=certificate) as receiver:
        _, delivery = _told(event, receiver.url)
        # Not yet trusted: the certificate is refused, nothing is delivered.
        assert delivery_attempt(delivery_id=delivery.id, now=timezone.now()) == "retry"
        assert "CERTIFICATE_VERIFY_FAILED" in delivery.tries.get().error
        monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))
        later = timezone.now() + timedelta(minutes=5)
        assert delivery_attempt(delivery_id=delivery.id, now=later) == "delivered"
    assert receiver.url.startswith("https://localhost:")
    assert len(receiver.got) == 1
