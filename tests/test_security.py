import os
import secrets
import shlex
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.test import Client

from config.asgi import django_asgi_app
from config.workers import uvicorn_config
from tests.asgi import call
from tests.helpers import staff_client
from tests.processes import ROOT

pytestmark = pytest.mark.django_db


def test_check_deploy_is_clean_with_production_settings() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "WR_PASS_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
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
    # WebSockets to the room only: not `ws:`/`wss:`, which would allow any host.
    connect = next(
        d.split()[1:] for d in page["Content-Security-Policy"].split(";") if "connect-src" in d
    )
    room = settings.WR_PUBLIC_URL.replace("https://", "wss://").replace("http://", "ws://")
    assert connect == ["'self'", room]


def test_forms_need_their_csrf_token(event) -> None:
    browser = Client(enforce_csrf_checks=True)
    assert browser.post(f"/e/{event.slug}/", {"access_code": ""}).status_code == 403
    staff = staff_client("s", "change_event", csrf_checks=True)
    response = staff.post(
        f"/dashboard/events/{event.slug}/control", {"action": "pause", "confirmed": "yes"}
    )
    assert response.status_code == 403
    event.refresh_from_db()
    assert event.control == "running"


def _run_stack_dry_run(**env: str) -> subprocess.CompletedProcess[str]:
    """What scripts/run_stack.sh (``make run``) would start, without starting it."""
    base = {k: v for k, v in os.environ.items() if k not in {"BIND", "DJANGO_DEBUG"}}
    return subprocess.run(
        ["scripts/run_stack.sh", "--dry-run"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def _gunicorn_bind(stdout: str) -> str:
    (line,) = [line for line in stdout.splitlines() if "gunicorn" in line]
    argv = shlex.split(line)
    return argv[argv.index("-b") + 1]


def test_the_demo_stack_binds_to_loopback_and_says_it_is_a_demo() -> None:
    result = _run_stack_dry_run()
    assert result.returncode == 0, result.stderr
    assert _gunicorn_bind(result.stdout) == "127.0.0.1:8000"
    assert "DEMO MODE: DEBUG on, login admin/admin, do not expose" in result.stdout


@pytest.mark.parametrize("bind", ["0.0.0.0:8000", ":8000", "[::]:8000", "192.168.1.5:8000"])
def test_the_demo_stack_refuses_to_listen_beyond_loopback_with_debug_on(bind) -> None:
    result = _run_stack_dry_run(BIND=bind)
    assert result.returncode != 0
    assert "gunicorn" not in result.stdout
    assert "refusing" in result.stderr


def test_the_stack_may_listen_everywhere_with_debug_off() -> None:
    result = _run_stack_dry_run(BIND="0.0.0.0:8000", DJANGO_DEBUG="0")
    assert result.returncode == 0, result.stderr
    assert _gunicorn_bind(result.stdout) == "0.0.0.0:8000"
    assert "DEMO MODE" not in result.stdout


def test_uvicorn_leaves_the_client_address_to_the_rooms_rule() -> None:
    """Its own proxy headers would believe any peer on loopback (a local nginx, anyone's
    curl), whatever WR_TRUSTED_PROXY_COUNT and DJANGO_BEHIND_TLS_PROXY say."""
    assert uvicorn_config()["proxy_headers"] is False


@pytest.mark.parametrize("path", ["/static/../manage.py", "/static/../../etc/passwd"])
def test_a_static_path_that_leads_out_of_the_static_files_is_not_found(path: str) -> None:
    reply = call(django_asgi_app, "GET", path)
    assert reply.status == 404
    assert b"DJANGO_SETTINGS_MODULE" not in reply.raw
