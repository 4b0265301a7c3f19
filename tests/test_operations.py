import subprocess

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import Client

from config import health
from config.celery import app as celery_app
from config.env import database_from_url, env_bool, env_int
from config.health import broker_answers
from config.version import VERSION
from queueing import in_process
from tests.brokers import AMQP_URL, amqp_require
from tests.processes import ROOT


def test_healthz_is_up_and_names_the_release(db) -> None:
    response = Client().get("/healthz")
    assert (response.status_code, response["Content-Type"]) == (200, "application/json")
    assert response.json() == {"status": "ok", "version": VERSION}


def test_readyz_checks_postgresql_redis_and_the_broker(db) -> None:
    ready = Client().get("/readyz")
    assert ready.status_code == 200 and ready.content == b"ok"
    metrics = Client().get("/metrics").content.decode()
    assert 'waitingroom_dependency_out{dependency="redis",impact="degraded"} 0.0' in metrics
    assert 'waitingroom_dependency_out{dependency="broker",impact="degraded"} 0.0' in metrics


def test_readyz_says_degraded_when_the_broker_does_not_answer(db, settings) -> None:
    """Joins and polls go on without the broker (the web stays in rotation), but nobody is let
    in on a tick: the probe names it."""
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    ready = Client().get("/readyz")
    assert (ready.status_code, ready.content) == (200, b"degraded: broker")
    metrics = Client().get("/metrics").content.decode()
    assert 'waitingroom_dependency_out{dependency="broker",impact="degraded"} 1.0' in metrics


def test_the_brokers_answer_is_kept_for_a_moment(db, monkeypatch) -> None:
    """Probes every few seconds from each balancer open no broker connection each."""
    assert broker_answers()

    def refused(*args, **kwargs):
        raise ConnectionRefusedError

    monkeypatch.setattr(celery_app, "connection_for_write", refused)
    assert broker_answers()  # kept
    monkeypatch.setattr(health, "BROKER_ANSWER_SECONDS", 0.0)
    in_process.clear_all()
    assert not broker_answers()


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


def test_rebuild_hot_queue_command(event, capsys) -> None:
    call_command("rebuild_hot_queue", event.slug)
    assert "rebuilt" in capsys.readouterr().out


def test_the_redis_eviction_policy_is_checked() -> None:
    from queueing.checks import redis_eviction_policy

    assert redis_eviction_policy() == []


def test_every_redis_node_must_refuse_to_evict(monkeypatch) -> None:
    from queueing.checks import redis_eviction_policy

    nodes = {"10.0.0.1:6379": "noeviction", "10.0.0.2:6379": "allkeys-lru"}
    monkeypatch.setattr("queueing.checks.eviction_policies", lambda: nodes)
    (error,) = redis_eviction_policy()
    assert error.id == "queueing.E001" and "10.0.0.2:6379" in error.msg


def test_the_readmes_production_commands_are_docker_composes() -> None:
    """The documented production path runs what docker-compose.yml runs, no more, no less."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    readme = (ROOT / "README.md").read_text()
    production = readme[readme.index("## Production") :]
    environment = compose["x-app"]["environment"]
    assert environment["DJANGO_DEBUG"] == "0"
    for name in environment:
        assert name in production, f"{name} is not in the README's Production section"
    web = compose["services"]["web"]["command"][-1]
    gunicorn = web[web.index("gunicorn") :]
    commands = [
        " ".join(gunicorn.split()),
        " ".join(compose["services"]["worker"]["command"]),
        " ".join(compose["services"]["beat"]["command"]),
        " ".join(compose["services"]["migrate"]["command"]),
    ]
    for command in commands:
        assert command in production, f"{command!r} is not in the README's Production section"
    assert "createsuperuser" in production and "seed_demo" in production


def _ensure_rabbitmq(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["scripts/ensure_rabbitmq.sh", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ensure_rabbitmq_leaves_a_running_or_remote_broker_alone() -> None:
    """`make run` with an amqp:// CELERY_BROKER_URL (and `make test`) run this script."""
    amqp_require()
    running = _ensure_rabbitmq(AMQP_URL)
    assert (running.returncode, running.stdout, running.stderr) == (0, "", "")
    remote = _ensure_rabbitmq("amqp://room:secret@broker.invalid:5672/room")
    assert remote.returncode == 0
    assert "not on this machine" in remote.stderr and "secret" not in remote.stderr
    assert _ensure_rabbitmq("redis://127.0.0.1:6379/0").returncode == 2
