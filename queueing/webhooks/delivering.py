"""Webhook attempts, by the workers: claimed by compare-and-set, POSTed to an address checked
before connecting, recorded, and either done or put off (docs/operations.md, "Webhooks").

- **Claim**: an attempt takes a delivery only while it is pending and due, and moves its
  ``due_at`` past the attempt's own timeout in the same ``UPDATE``: two workers asked for the
  same delivery (the first ask and the sweep, a task run twice) never both send it, and a
  worker killed mid-attempt leaves it due again a little later.
- **Where it goes**: the host is resolved once, every address it has is judged
  (``rules/webhooks.address_refusal``) and the connection goes to the address judged, with
  the host's name kept for TLS and ``Host``: a name that resolves elsewhere a moment later
  (DNS rebinding) cannot steer the POST to the room's own network. Redirects are not
  followed (a 3xx is a failure).
- **After**: 2xx is delivered; anything else is tried again after ``retry_delay``, up to
  ``WR_WEBHOOK_ATTEMPTS``. An endpoint whose attempts failed ``WR_WEBHOOK_DISABLE_AFTER``
  times in a row is turned off, with the reason, and its pending deliveries cancelled.
"""

from __future__ import annotations

import http.client
import logging
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import F

from queueing.models import (
    WebhookAttempt,
    WebhookDelivery,
    WebhookDeliveryState,
    WebhookEndpoint,
)
from queueing.rules.webhooks import address_refusal, delivered, retry_delay, signature_header
from queueing.webhooks.emitting import deliveries_ask
from queueing.webhooks.secrets import signing_secrets

logger = logging.getLogger(__name__)

EXCERPT_BYTES = 1024
SWEEP_BATCH = 500
USER_AGENT = "waitingroom-webhooks/1"


class DestinationRefused(Exception):
    """The endpoint's host resolves to an address the room will not call."""


@dataclass(frozen=True)
class Answer:
    status_code: int
    excerpt: str


def _resolved(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        refusal = address_refusal(address, allowed=settings.WR_WEBHOOK_ALLOWED_NETWORKS)
        if refusal:
            # Any address refused refuses the host: which one a client picks is not ours.
            raise DestinationRefused(refusal)
    return addresses


def webhook_post(url: str, *, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST ``body`` to ``url`` at an address checked first (module docstring)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    address = _resolved(host, port)[0]
    connection: http.client.HTTPConnection = (
        http.client.HTTPSConnection(host, port, timeout=timeout)
        if https
        else http.client.HTTPConnection(host, port, timeout=timeout)
    )

    def pinned(_where: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        return socket.create_connection((address, port), timeout)

    # http.client connects through this attribute; TLS still checks the host's own name.
    connection._create_connection = pinned  # type: ignore[attr-defined]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        excerpt = response.read(EXCERPT_BYTES).decode("utf-8", errors="replace")
        return Answer(status_code=response.status, excerpt=excerpt)
    finally:
        connection.close()


def _claim(delivery_id: int, *, now: datetime) -> int | None:
    """The attempt's number if this call took the delivery (compare-and-set), else None."""
    hold = timedelta(seconds=2 * settings.WR_WEBHOOK_TIMEOUT_SECONDS + 30)
    with transaction.atomic():
        taken = WebhookDelivery.objects.filter(
            pk=delivery_id,
            state=WebhookDeliveryState.PENDING,
            due_at__lte=now,
            endpoint__enabled=True,
        ).update(attempts=F("attempts") + 1, due_at=now + hold)
        if not taken:
            return None
        return WebhookDelivery.objects.values_list("attempts", flat=True).get(pk=delivery_id)


def delivery_attempt(*, delivery_id: int, now: datetime) -> str | None:
    """One attempt of a delivery, if it is due and nobody else is making one: its outcome
    (``delivered``, ``retry``, ``failed``), or None when there was nothing to do."""
    number = _claim(delivery_id, now=now)
    if number is None:
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    endpoint = delivery.endpoint
    timestamp = int(now.timestamp())
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Waitingroom-Webhook-Id": str(delivery.public_id),
        "X-Waitingroom-Webhook-Timestamp": str(timestamp),
        "X-Waitingroom-Webhook-Signature": signature_header(
            signing_secrets(endpoint, now=now), timestamp=timestamp, body=body
        ),
    }
    started = time.monotonic()
    status_code: int | None = None
    excerpt = error = ""
    try:
        answer = webhook_post(
            endpoint.url, body=body, headers=headers, timeout=settings.WR_WEBHOOK_TIMEOUT_SECONDS
        )
        status_code, excerpt = answer.status_code, answer.excerpt
        if not delivered(status_code):
            error = f"answered {status_code}"
    except DestinationRefused as refused:
        error = f"refused: {refused}"
    except TimeoutError:
        error = f"timed out after {settings.WR_WEBHOOK_TIMEOUT_SECONDS:g} s"
    except (OSError, http.client.HTTPException) as failed:
        error = f"{type(failed).__name__}: {failed}"[:500]
    elapsed = time.monotonic() - started
    return _record(
        delivery,
        number=number,
        now=now,
        elapsed=elapsed,
        status_code=status_code,
        excerpt=excerpt,
        error=error,
    )


def _record(
    delivery: WebhookDelivery,
    *,
    number: int,
    now: datetime,
    elapsed: float,
    status_code: int | None,
    excerpt: str,
    error: str,
) -> str:
    finished = now + timedelta(seconds=elapsed)
    ok = not error
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=now,
            duration_ms=int(elapsed * 1000),
            status_code=status_code,
            response_excerpt=excerpt,
            error=error[:500],
        )
        mine = WebhookDelivery.objects.filter(
            pk=delivery.pk, attempts=number, state=WebhookDeliveryState.PENDING
        )
        if ok:
            mine.update(state=WebhookDeliveryState.DELIVERED, delivered_at=finished)
            WebhookEndpoint.objects.filter(pk=delivery.endpoint_id).update(failures_in_a_row=0)
            return "delivered"
        if number >= settings.WR_WEBHOOK_ATTEMPTS:
            mine.update(state=WebhookDeliveryState.FAILED)
            outcome = "failed"
        else:
            delay = retry_delay(number, first_seconds=settings.WR_WEBHOOK_RETRY_SECONDS)
            mine.update(due_at=finished + timedelta(seconds=delay))
            outcome = "retry"
        _endpoint_failed(delivery.endpoint_id, error=error)
    return outcome


def _endpoint_failed(endpoint_id: int, *, error: str) -> None:
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(
        failures_in_a_row=F("failures_in_a_row") + 1
    )
    limit = settings.WR_WEBHOOK_DISABLE_AFTER
    turned_off = WebhookEndpoint.objects.filter(
        pk=endpoint_id, enabled=True, failures_in_a_row__gte=limit
    ).update(
        enabled=False,
        disabled_reason=f"Turned off by the room after {limit} failed attempts in a row; "
        f"the last: {error}"[:500],
    )
    if turned_off:
        logger.warning("webhook endpoint %s turned off after %s failures", endpoint_id, limit)
        deliveries_cancel(endpoint_id)


def deliveries_cancel(endpoint_id: int) -> int:
    """The endpoint's pending deliveries cancelled (it was turned off): none goes out late
    when it is turned on again."""
    return WebhookDelivery.objects.filter(
        endpoint_id=endpoint_id, state=WebhookDeliveryState.PENDING
    ).update(state=WebhookDeliveryState.CANCELLED)


def deliveries_sweep(*, now: datetime) -> list[int]:
    """Ask for an attempt of every pending delivery now due (at most ``SWEEP_BATCH`` a sweep,
    oldest first); their ids. Retries, and first attempts whose ask was lost."""
    due = list(
        WebhookDelivery.objects.filter(
            state=WebhookDeliveryState.PENDING, due_at__lte=now, endpoint__enabled=True
        )
        .order_by("due_at")
        .values_list("id", flat=True)[:SWEEP_BATCH]
    )
    if due:
        deliveries_ask(due, expires=2 * settings.WR_WEBHOOK_SWEEP_SECONDS)
    return due
