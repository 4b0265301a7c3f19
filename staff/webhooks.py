"""Webhook endpoints staff register, change, rotate and remove (the admin and the staff API
both call these). What a refused URL or type list is refused for is said here once.

The signing secret is returned once, by the creation and the rotation, and stored sealed
(queueing/webhooks/secrets.py). After a rotation the previous secret signs too for
``ROTATION_OVERLAP`` (two signatures in the header), so that a receiver can switch without
refusing the deliveries meanwhile."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from events.models import Event
from queueing.models import WebhookEndpoint
from queueing.rules.webhooks import address_refusal, types_refusal, url_refusal
from queueing.webhooks.delivering import deliveries_cancel
from queueing.webhooks.secrets import secret_new

ROTATION_OVERLAP = timedelta(hours=24)
CHANGEABLE = ("event", "url", "types", "description", "enabled")


@dataclass(frozen=True)
class EndpointWithSecret:
    endpoint: WebhookEndpoint
    secret: str  # shown once


def endpoint_url_refusal(url: str) -> str | None:
    """Why ``url`` is refused as an endpoint: its form (https), and a host that is itself an
    address (or ``localhost``) the room will not call. Names are judged again at every
    attempt, on the addresses they resolve to then (queueing/webhooks/delivering.py)."""
    refusal = url_refusal(url, plain_http=settings.WR_WEBHOOK_ALLOW_HTTP)
    if refusal:
        return refusal
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        host = "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    return address_refusal(host, allowed=settings.WR_WEBHOOK_ALLOWED_NETWORKS)


def _checked(fields: dict[str, Any]) -> None:
    errors: dict[str, str] = {}
    if "url" in fields:
        refusal = endpoint_url_refusal(fields["url"])
        if refusal:
            errors["url"] = refusal
    if "types" in fields:
        refusal = types_refusal(fields["types"])
        if refusal:
            errors["types"] = refusal
    if errors:
        raise ValidationError(errors)


def endpoint_create(
    *,
    url: str,
    types: list[str],
    actor: str,
    now: datetime,
    event: Event | None = None,
    description: str = "",
    enabled: bool = True,
) -> EndpointWithSecret:
    _checked({"url": url, "types": types})
    secret, sealed = secret_new()
    endpoint = WebhookEndpoint.objects.create(
        event=event,
        url=url,
        types=sorted(set(types)),
        description=description,
        enabled=enabled,
        secret_sealed=sealed,
        created_at=now,
        created_by=actor,
    )
    return EndpointWithSecret(endpoint, secret)


def endpoint_update(*, endpoint: WebhookEndpoint, changes: dict[str, Any]) -> WebhookEndpoint:
    """Change the given fields. Turned off, its pending deliveries are cancelled; turned on,
    its count of failures starts again and the room's reason for turning it off goes."""
    unknown = set(changes) - set(CHANGEABLE)
    if unknown:
        raise ValueError(f"unknown endpoint fields: {sorted(unknown)}")
    _checked(changes)
    with transaction.atomic():
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        was_enabled = locked.enabled
        for name, value in changes.items():
            setattr(locked, name, sorted(set(value)) if name == "types" else value)
        if locked.enabled and not was_enabled:
            locked.failures_in_a_row = 0
            locked.disabled_reason = ""
        locked.save()
        if was_enabled and not locked.enabled:
            deliveries_cancel(locked.pk)
    return locked


def endpoint_rotate_secret(*, endpoint: WebhookEndpoint, now: datetime) -> EndpointWithSecret:
    """A new secret, shown once; the previous one signs too for ``ROTATION_OVERLAP``."""
    secret, sealed = secret_new()
    with transaction.atomic():
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        locked.previous_secret_sealed = locked.secret_sealed
        locked.previous_secret_until = now + ROTATION_OVERLAP
        locked.secret_sealed = sealed
        locked.save(
            update_fields=["secret_sealed", "previous_secret_sealed", "previous_secret_until"]
        )
    return EndpointWithSecret(locked, secret)


def endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Removed with its deliveries and their attempts."""
    endpoint.delete()
