import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import Client

from config.env import database_from_url, env_bool, env_int
from events.models import Event


def test_healthz_is_up(db) -> None:
    response = Client().get("/healthz")
    assert (response.status_code, response.content) == (200, b"ok")


def test_readyz_checks_postgresql_and_redis(db) -> None:
    assert Client().get("/readyz").status_code == 200


@pytest.mark.parametrize(
    ("reader", "value"),
    [
        (lambda: env_int("WR_X", 1), "ten"),
        (lambda: env_bool("WR_X", True), "maybe"),
        (lambda: env_int("WR_X", 1, minimum=5), "2"),
    ],
)
def test_bad_environment_values_fail_loudly(monkeypatch, reader, value) -> None:
    monkeypatch.setenv("WR_X", value)
    with pytest.raises(ImproperlyConfigured):
        reader()


def test_database_url_parsing() -> None:
    db = database_from_url("postgres://u:p%40ss@db.internal:6543/room")
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
        "u",
        "p@ss",
        "db.internal",
        "6543",
        "room",
    )
    with pytest.raises(ImproperlyConfigured):
        database_from_url("mysql://x/y")


def test_seed_demo_is_idempotent(db, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        call_command("seed_demo")
        call_command("seed_demo")
    assert Event.objects.filter(slug="demo").count() == 1


def test_rebuild_hot_queue_command(event, capsys) -> None:
    call_command("rebuild_hot_queue", event.slug)
    assert "rebuilt" in capsys.readouterr().out


def test_the_redis_eviction_policy_is_checked() -> None:
    from queueing.checks import redis_eviction_policy

    assert redis_eviction_policy() == []
