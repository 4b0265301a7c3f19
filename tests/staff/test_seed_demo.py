"""The demo's data (staff/management/commands/seed_demo.py, what `make run` starts with): one
on-sale however often it runs, and no admin/admin account with DEBUG off unless forced."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from events.models import Event


def test_seed_demo_is_idempotent_and_says_it_is_a_demo(
    db, settings, django_capture_on_commit_callbacks, capsys
) -> None:
    settings.DEBUG = True  # what `make run` has; pytest-django turns it off
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo")
        call_command("seed_demo")
    assert Event.objects.filter(slug="demo").count() == 1
    assert "DEMO MODE: DEBUG on, login admin/admin, do not expose" in capsys.readouterr().out


def test_seed_demo_refuses_admin_admin_with_debug_off_unless_forced(
    db, settings, django_capture_on_commit_callbacks, capsys
) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="createsuperuser"):
        call_command("seed_demo")
    assert not get_user_model().objects.filter(username="admin").exists()
    assert not Event.objects.filter(slug="demo").exists()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo", "--force")
    assert get_user_model().objects.get(username="admin").check_password("admin")
    assert "change its password now" in capsys.readouterr().out
