"""Whether a restored database can serve the room (dashboard/restore_checks.py, manage.py
restore_check): its trails recompute and its pass keys sign."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.utils import timezone

from dashboard.restore_checks import restore_report
from queueing.models import AuditRecord, PassKey
from queueing.passes.signing import signing_key
from tests.helpers import fans_join

pytestmark = pytest.mark.django_db


def test_a_whole_restore_is_fit_to_serve(event, capsys) -> None:
    fans_join(event.slug, 3)
    signing_key(now=timezone.now())
    report = restore_report(now=timezone.now())
    assert report.ok
    (sale,) = report.on_sales
    assert (sale.slug, sale.entries, sale.chain_ok) == (event.slug, {"waiting": 3}, True)
    call_command("restore_check")
    out = capsys.readouterr().out
    assert f"on-sale {event.slug}: entries 3 waiting; trail intact" in out
    assert "signs and verifies" in out and "restore ok: 1 on-sales, 1 pass keys" in out


def test_a_room_that_never_signed_a_pass_needs_no_key(event, capsys) -> None:
    assert restore_report(now=timezone.now()).ok
    call_command("restore_check")
    assert "no pass-signing key yet" in capsys.readouterr().out


def test_a_broken_trail_fails_the_check(event) -> None:
    fans_join(event.slug, 2)
    AuditRecord.objects.filter(event=event, seq=2).update(actor="someone else")
    report = restore_report(now=timezone.now())
    assert not report.ok and "hash" in report.on_sales[0].problem
    with pytest.raises(CommandError, match="not fit to serve"):
        call_command("restore_check")


def test_a_key_that_cannot_be_opened_fails_the_check(event, capsys) -> None:
    key = signing_key(now=timezone.now())
    PassKey.objects.filter(pk=key.pk).update(private_key_sealed="restored without its secret")
    (checked,) = restore_report(now=timezone.now()).keys
    assert (checked.kid, checked.signs) == (key.kid, False) and checked.problem
    with pytest.raises(CommandError):
        call_command("restore_check")
    assert f"pass key {key.kid}: DOES NOT SIGN" in capsys.readouterr().out


def test_a_restore_without_the_encryption_key_that_sealed_its_pass_keys_fails(event, settings):
    signing_key(now=timezone.now())
    # The database restored where WR_PASS_KEY_ENCRYPTION_KEY was not carried over: another key.
    settings.WR_PASS_KEY_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    (checked,) = restore_report(now=timezone.now()).keys
    assert not checked.signs and "WR_PASS_KEY_ENCRYPTION_KEY" in checked.problem
    with pytest.raises(CommandError, match="not fit to serve"):
        call_command("restore_check")
