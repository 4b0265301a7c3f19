import os
import secrets
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.processes import ROOT

pytestmark = pytest.mark.django_db


def test_check_deploy_is_clean_with_production_settings() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "room.example",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "0"}
    env.pop("DJANGO_SECRET_KEY", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_pages_carry_security_headers(event) -> None:
    page = Client().get(f"/e/{event.slug}/", follow=True)
    assert page.status_code == 200
    assert "script-src 'self'" in page["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
    assert page["X-Frame-Options"] == "DENY"
    assert page["X-Content-Type-Options"] == "nosniff"
    assert page["Referrer-Policy"] == "same-origin"


def test_forms_need_their_csrf_token(event) -> None:
    browser = Client(enforce_csrf_checks=True)
    assert browser.post(f"/e/{event.slug}/", {"access_code": ""}).status_code == 403
    staff = Client(enforce_csrf_checks=True)
    staff.force_login(get_user_model().objects.create_user("s", password="pw", is_staff=True))
    response = staff.post(
        f"/dashboard/events/{event.slug}/control", {"action": "pause", "confirmed": "yes"}
    )
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.control == "running"
