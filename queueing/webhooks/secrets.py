"""Endpoints' signing secrets: made, sealed at rest under the pass keys' encryption keys
(queueing/passes/sealing.py), and the ones that sign now."""

from __future__ import annotations

import secrets
from datetime import datetime

from django.db import transaction

from queueing.models import WebhookEndpoint
from queueing.passes.sealing import private_key_reseal, text_open, text_seal

SECRET_PREFIX = "whsec_"


def secret_new() -> tuple[str, str]:
    """A new signing secret, and the same sealed for the database."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    return secret, text_seal(secret)


def signing_secrets(endpoint: WebhookEndpoint, *, now: datetime) -> list[str]:
    """The current secret, and the previous one while a rotation's overlap lasts."""
    found = [text_open(endpoint.secret_sealed)]
    until = endpoint.previous_secret_until
    if endpoint.previous_secret_sealed and until is not None and now < until:
        found.append(text_open(endpoint.previous_secret_sealed))
    return found


def endpoint_secrets_reseal() -> int:
    """Every endpoint's secrets sealed again under the first encryption key (``manage.py
    reseal_pass_keys``, with the pass keys); how many endpoints."""
    with transaction.atomic():
        endpoints = list(WebhookEndpoint.objects.select_for_update())
        for endpoint in endpoints:
            endpoint.secret_sealed = private_key_reseal(endpoint.secret_sealed)
            if endpoint.previous_secret_sealed:
                endpoint.previous_secret_sealed = private_key_reseal(
                    endpoint.previous_secret_sealed
                )
            endpoint.save(update_fields=["secret_sealed", "previous_secret_sealed"])
    return len(endpoints)
