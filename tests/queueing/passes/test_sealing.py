"""Pass-signing private keys sealed at rest (queueing/passes/sealing.py): what PostgreSQL holds
is no key, passes still sign and verify, the encryption key rotates, and the migration seals
keys stored before it (and opens them again backwards)."""

from __future__ import annotations

import importlib
import uuid
from datetime import timedelta

import jwt
import pytest
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import serialization
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings
from django.utils import timezone

from queueing.checks import pass_keys_open
from queueing.models import PassKey
from queueing.passes.sealing import SealedKeyUnreadable, private_key_open
from queueing.passes.signing import pass_decode, pass_issue, pass_key_rotate, signing_key

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
sealed_migration = importlib.import_module("queueing.migrations.0014_pass_keys_sealed")


def a_pass() -> str:
    now = timezone.now()
    return pass_issue(
        event_slug="sealed",
        ticket_id=uuid.uuid4(),
        tier="general",
        admitted_at=now,
        expires_at=now + timedelta(minutes=10),
        now=now,
    )


def signed_by(key: PassKey) -> bool:
    token = a_pass()
    verified = pass_decode(token, now=timezone.now()).event_slug == "sealed"
    return verified and jwt.get_unverified_header(token)["kid"] == key.kid


def stored(key: PassKey) -> str:
    return PassKey.objects.get(pk=key.pk).private_key_sealed


def test_the_stored_key_is_not_a_private_key_and_passes_still_verify() -> None:
    key = signing_key(now=timezone.now())
    text = stored(key)
    assert "BEGIN" not in text and "PRIVATE" not in text
    with pytest.raises(ValueError):
        serialization.load_pem_private_key(text.encode(), password=None)
    token = a_pass()
    assert pass_decode(token, now=timezone.now()).event_slug == "sealed"


def test_keys_still_open_after_the_encryption_key_is_rotated_and_resealed(capsys) -> None:
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[OLD]):
        key = signing_key(now=timezone.now())
        assert signed_by(key)
    # A new encryption key first, the old one second: what the old one sealed still opens.
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[NEW, OLD]):
        assert signed_by(key)
        call_command("reseal_pass_keys")
        assert "1 pass-signing keys sealed" in capsys.readouterr().out
    resealed = stored(key)
    assert resealed != key.private_key_sealed
    # Resealed under the new key alone: the old one can go.
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[NEW]):
        assert signed_by(key)
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[OLD]):
        with pytest.raises(SealedKeyUnreadable, match="keep the key that sealed it"):
            a_pass()


def test_the_migration_seals_plain_keys_and_opens_them_backwards() -> None:
    key = signing_key(now=timezone.now())
    pem = (
        private_key_open(key.private_key_sealed)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    PassKey.objects.filter(pk=key.pk).update(private_key_sealed=pem)  # as stored before
    sealed_migration.seal(apps, None)
    sealed = stored(key)
    assert not sealed.startswith("-----BEGIN")
    assert pass_decode(a_pass(), now=timezone.now()).event_slug == "sealed"
    sealed_migration.seal(apps, None)  # sealed keys are left alone
    assert stored(key) == sealed
    sealed_migration.unseal(apps, None)
    assert stored(key) == pem


def test_a_key_that_signs_and_does_not_open_is_an_error_at_migrate() -> None:
    now = timezone.now()
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[OLD]):
        superseded = signing_key(now=now - timedelta(days=2))
        signing = pass_key_rotate(now=now - timedelta(days=1), activate_in=timedelta(0))
        upcoming = pass_key_rotate(now=now)
        assert pass_keys_open(databases=["default"]) == []
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[NEW]):
        errors = pass_keys_open(databases=["default"])
    # The superseded key signs nothing any more: no error for it.
    assert sorted(error.msg.split()[3] for error in errors) == sorted([signing.kid, upcoming.kid])
    assert {error.id for error in errors} == {"queueing.E003"}
    assert superseded.kid not in " ".join(error.msg for error in errors)
    # The check runs with the database's checks (migrate, check --database default), only.
    with override_settings(WR_PASS_KEY_ENCRYPTION_KEYS=[NEW]):
        assert pass_keys_open() == []
        call_command("check")
        with pytest.raises(SystemCheckError, match=r"queueing\.E003"):
            call_command("check", databases=["default"])
