"""Endpoints' secrets sealed like the pass keys, and resealed with them."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from queueing.models import WebhookEndpoint
from queueing.passes.sealing import SealedKeyUnreadable
from queueing.webhooks.secrets import signing_secrets
from staff.webhooks import endpoint_create, endpoint_rotate_secret

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_secrets_are_resealed_with_the_pass_keys(capsys) -> None:
    now = timezone.now()
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[OLD]):
        made = endpoint_create(
            url="https://hooks.example.com/", types=["onsale.paused"], actor="x", now=now
        )
        rotated = endpoint_rotate_secret(endpoint=made.endpoint, now=now)
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[NEW, OLD]):
        call_command("reseal_pass_keys")
        assert "1 webhook endpoints' secrets sealed" in capsys.readouterr().out
    endpoint = WebhookEndpoint.objects.get()
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[NEW]):
        assert signing_secrets(endpoint, now=now) == [rotated.secret, made.secret]
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[OLD]), pytest.raises(SealedKeyUnreadable):
        signing_secrets(endpoint, now=now)
