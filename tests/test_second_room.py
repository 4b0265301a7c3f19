"""Two rooms on one machine keep their data, links and live updates apart: the set-up
script makes the database DATABASE_URL names, a room's Redis prefix (its keys and its
channel layer's groups) and its public URL default to its own, and a prefix another
database claimed is refused rather than shared (README, "A second room on one machine")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest

from queueing.checks import redis_prefix_is_this_rooms, room_database
from queueing.hot import keys
from tests.processes import ROOT

SETTINGS = (
    "import json, django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings';"
    "from django.conf import settings as s; print(json.dumps([s.WR_REDIS_PREFIX,"
    " s.CHANNEL_LAYERS['default']['CONFIG']['prefix'], s.WR_PUBLIC_URL]))"
)


def _settings(**env: str) -> list[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "BIND", "WR_REDIS_PREFIX", "CHANNELS_PREFIX", "WR_PUBLIC_URL"}
    }
    result = subprocess.run(
        [sys.executable, "-c", SETTINGS],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def test_a_second_room_has_its_own_prefix_channels_and_links_by_default() -> None:
    assert _settings() == ["wr", "wr:asgi", "http://127.0.0.1:8000"]
    second = _settings(
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/room_two", BIND="127.0.0.1:8001"
    )
    assert second == ["wr-room_two", "wr-room_two:asgi", "http://127.0.0.1:8001"]


def test_the_set_up_script_makes_the_database_database_url_names() -> None:
    name = f"wr_second_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}"}
    env.pop("DB_NAME", None)
    try:
        subprocess.run(
            [str(ROOT / "scripts" / "ensure_services.sh")], env=env, check=True, timeout=120
        )
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres") as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        assert found == (1,)
    finally:
        with psycopg.connect(
            "postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True
        ) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


@pytest.mark.django_db
def test_a_prefix_another_database_claimed_is_refused(redis_client) -> None:
    assert redis_prefix_is_this_rooms() == []  # claimed for this room's database
    assert redis_client.get(keys.room_owner()).decode() == room_database()
    assert redis_prefix_is_this_rooms() == []  # and still its own
    redis_client.set(keys.room_owner(), "db.example:5432/another_room")
    (error,) = redis_prefix_is_this_rooms()
    assert error.id == "queueing.E002"
    assert "another_room" in error.msg and "WR_REDIS_PREFIX" in error.hint
