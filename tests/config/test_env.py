"""The settings' readers (config/env.py) and what config/settings.py makes of them: secrets from
``*_FILE``, DATABASE_URL's options kept and merged with the room's, the secret key's fallbacks
and the pass-key encryption keys. Settings are read once per process, so each case reads them
in a fresh interpreter with the environment it sets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from config.env import database_from_url, database_options, env_secret, fernet_keys_checked

ROOT = Path(__file__).resolve().parent.parent.parent
SECRET = "a-production-secret-" + "s" * 40


def settings_read(names: list[str], **env: str) -> dict:
    """``names`` from config.settings as a fresh process reads them under ``env`` (added to a
    clean environment of DJANGO_*, WR_*, DATABASE_*, REDIS_*, ... variables)."""
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "WR_", "DATABASE_", "REDIS_", "CHANNELS_", "CELERY_"))
    }
    script = (
        "import json, sys; import config.settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {names!r}}}, default=str))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode:
        raise ImproperlyConfigured(done.stderr.strip().splitlines()[-1])
    return json.loads(done.stdout)


# ------------------------------------------------------------------ *_FILE


def test_a_secret_comes_from_the_file_its_file_variable_names(monkeypatch, tmp_path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    monkeypatch.delenv("WR_X", raising=False)
    monkeypatch.setenv("WR_X_FILE", str(secret))
    assert env_secret("WR_X", "default") == "from-a-file"  # the trailing newline dropped


def test_a_secret_set_both_ways_is_refused(monkeypatch, tmp_path) -> None:
    (tmp_path / "secret").write_text("one")
    monkeypatch.setenv("WR_X", "two")
    monkeypatch.setenv("WR_X_FILE", str(tmp_path / "secret"))
    with pytest.raises(ImproperlyConfigured, match="WR_X or WR_X_FILE, not both"):
        env_secret("WR_X", "")


def test_an_unreadable_secret_file_is_a_clear_start_up_error(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("WR_X", raising=False)
    monkeypatch.setenv("WR_X_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match=r"WR_X_FILE=.*missing.*cannot be read"):
        env_secret("WR_X", "")


def test_without_either_the_default_holds(monkeypatch) -> None:
    monkeypatch.delenv("WR_X", raising=False)
    monkeypatch.delenv("WR_X_FILE", raising=False)
    assert env_secret("WR_X", "fallback") == "fallback"


def test_the_settings_read_every_secret_from_files(tmp_path) -> None:
    values = {
        "DJANGO_SECRET_KEY": SECRET,
        "DJANGO_SECRET_KEY_FALLBACKS": "old-one\nold-two\n",
        "DATABASE_URL": "postgres://room:pw@db.internal:5432/room?sslmode=require",
        "REDIS_URL": "redis://:pw@redis.internal:6379/0",
        "CHANNELS_REDIS_URL": "redis://:pw@pubsub.internal:6379/0",
        "CELERY_BROKER_URL": "amqp://room:pw@rabbitmq.internal:5672//",
        "EMAIL_HOST_PASSWORD": "smtp-pw",
        "WR_METRICS_TOKEN": "scrape-me",
        "WR_PASS_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
    }
    env = {"DJANGO_DEBUG": "0"}
    for name, value in values.items():
        (tmp_path / name).write_text(value + "\n")
        env[f"{name}_FILE"] = str(tmp_path / name)
    read = settings_read(
        [
            "SECRET_KEY",
            "SECRET_KEY_FALLBACKS",
            "DATABASES",
            "REDIS_URL",
            "CHANNELS_REDIS_URL",
            "CELERY_BROKER_URL",
            "EMAIL_HOST_PASSWORD",
            "WR_METRICS_TOKEN",
            "WR_PASS_KEY_ENCRYPTION_KEYS",
        ],
        **env,
    )
    assert read["SECRET_KEY"] == SECRET
    assert read["SECRET_KEY_FALLBACKS"] == ["old-one", "old-two"]
    database = read["DATABASES"]["default"]
    assert (database["HOST"], database["PASSWORD"]) == ("db.internal", "pw")
    assert database["OPTIONS"]["sslmode"] == "require"
    for name in ("REDIS_URL", "CHANNELS_REDIS_URL", "CELERY_BROKER_URL"):
        assert read[name] == values[name]
    assert read["EMAIL_HOST_PASSWORD"] == "smtp-pw"
    assert read["WR_METRICS_TOKEN"] == "scrape-me"
    assert read["WR_PASS_KEY_ENCRYPTION_KEYS"] == [values["WR_PASS_KEY_ENCRYPTION_KEY"]]


# ------------------------------------------------------------------ DATABASE_URL


def test_the_database_url_keeps_its_query_string() -> None:
    db = database_from_url(
        "postgresql://u:p%40ss@db.internal:6543/room?sslmode=verify-full"
        "&sslrootcert=/etc/ssl/ca.pem&application_name=room&options=-c%20statement_timeout%3D5000"
    )
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "u",
        "p@ss",
        "db.internal",
        "6543",
        "room",
    )
    assert db["OPTIONS"] == {
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ssl/ca.pem",
        "application_name": "room",
        "options": "-c statement_timeout=5000",
    }


@pytest.mark.parametrize(
    "url", ["mysql://x/y", "postgres://h:5432/", "postgres://h:port/room", "sqlite:///x"]
)
def test_a_database_url_the_room_cannot_use_is_refused(url: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        database_from_url(url)


def test_the_urls_options_go_over_the_rooms_and_server_options_are_joined() -> None:
    room = {"connect_timeout": 3, "options": "-c idle_in_transaction_session_timeout=30000"}
    merged = database_options(
        {"connect_timeout": 10, "sslmode": "require", "options": "-c statement_timeout=5000"},
        room,
    )
    assert merged == {
        "connect_timeout": 10,
        "sslmode": "require",
        # PostgreSQL applies them in order: one the URL repeats wins, the room's others stay.
        "options": "-c idle_in_transaction_session_timeout=30000 -c statement_timeout=5000",
    }
    assert database_options({}, room) == room
    with pytest.raises(ImproperlyConfigured, match="pool"):
        database_options({"pool": "true"}, room)


def test_the_settings_keep_the_urls_options_with_the_pool() -> None:
    read = settings_read(
        ["DATABASES"],
        DATABASE_URL="postgres://room@db.internal/room?sslmode=require&connect_timeout=9",
        DATABASE_POOL_MAX="8",
        DATABASE_IDLE_IN_TRANSACTION_MS="20000",
    )
    options = read["DATABASES"]["default"]["OPTIONS"]
    assert options["sslmode"] == "require"
    assert options["connect_timeout"] == 9
    assert options["options"] == "-c idle_in_transaction_session_timeout=20000"
    assert options["pool"]["max_size"] == 8
    assert read["DATABASES"]["default"]["PORT"] == "5432"


def test_the_room_reaches_postgresql_through_a_url_with_options(db) -> None:
    """libpq takes what the URL carried: a server setting from ``options`` is in force."""
    url = (
        "postgres://{USER}@{HOST}:{PORT}/{NAME}?application_name=wr-config-test"
        "&options=-c%20statement_timeout%3D4321"
    ).format(**connection.settings_dict)
    parsed = database_from_url(url)
    options = database_options(parsed["OPTIONS"], {"connect_timeout": 3})
    with psycopg.connect(
        host=parsed["HOST"],
        port=parsed["PORT"],
        user=parsed["USER"],
        password=parsed["PASSWORD"] or None,
        dbname=parsed["NAME"],
        **options,
    ) as conn:
        assert conn.execute("show statement_timeout").fetchone() == ("4321ms",)
        assert conn.execute("show application_name").fetchone() == ("wr-config-test",)


# ------------------------------------------------------------------ the secret key


def test_secret_key_fallbacks_come_from_the_environment_comma_separated() -> None:
    read = settings_read(
        ["SECRET_KEY", "SECRET_KEY_FALLBACKS"],
        DJANGO_SECRET_KEY=SECRET,
        DJANGO_SECRET_KEY_FALLBACKS=" old-one, old-two ,",
    )
    assert read == {"SECRET_KEY": SECRET, "SECRET_KEY_FALLBACKS": ["old-one", "old-two"]}


def test_without_debug_the_secret_key_is_required() -> None:
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY must be set"):
        settings_read(["SECRET_KEY"], DJANGO_DEBUG="0")


# ------------------------------------------------------------------ the pass-key encryption key


def test_without_debug_the_pass_key_encryption_key_is_required() -> None:
    with pytest.raises(ImproperlyConfigured, match="WR_PASS_KEY_ENCRYPTION_KEY must be set"):
        settings_read(["WR_PASS_KEY_ENCRYPTION_KEYS"], DJANGO_DEBUG="0", DJANGO_SECRET_KEY=SECRET)


def test_with_debug_the_pass_key_encryption_keys_are_derived_from_the_secret_keys() -> None:
    read = settings_read(
        ["WR_PASS_KEY_ENCRYPTION_KEYS"],
        DJANGO_SECRET_KEY=SECRET,
        DJANGO_SECRET_KEY_FALLBACKS="old-one",
    )
    derived = read["WR_PASS_KEY_ENCRYPTION_KEYS"]
    assert len(derived) == 2 and len(set(derived)) == 2
    assert all(Fernet(key) for key in derived)
    assert SECRET not in derived[0]


def test_pass_key_encryption_keys_are_a_comma_separated_list_checked_at_start() -> None:
    first, second = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    assert fernet_keys_checked("K", f"{first}, {second}") == [first, second]
    with pytest.raises(ImproperlyConfigured, match="K: key 2 is not a Fernet key"):
        fernet_keys_checked("K", f"{first},not-a-key")
