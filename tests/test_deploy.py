"""docker-compose.yml is the production shape, and nothing here runs it (no Docker engine in
CI): these checks hold it to what the tests do run. The same commands as tests/processes.py
and scripts/run_stack.sh, environment the settings read, the nginx the edge tests run, the
scheduler (the beat) in two replicas, and the healthchecks of the scheduler and the worker."""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from tests.edge import PAGES, PRODUCTION, RUN, TEMPLATE
from tests.processes import (
    ROOT,
    scheduler_check_command,
    scheduler_command,
    web_command,
    worker_command,
)

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
APP_ENV: dict[str, str] = COMPOSE["x-app"]["environment"]
IMAGE = COMPOSE["x-app"]["image"]
APP_DIR = "/app"  # the Dockerfile's WORKDIR

# Flags whose values may differ between production and a test: how many, where, how long,
# the scheduler's heartbeat file; and the flags only tests give (their own queue and node name).
PER_RUN = {"-w", "-b", "--graceful-timeout", "-c", "--heartbeat-file"}
TEST_ONLY = {"-Q", "-n"}


def shape(argv: list[str]) -> list[str]:
    """A command line without the program's directory, per-run values and test-only flags."""
    out = [Path(argv[0]).name]
    args = iter(argv[1:])
    for arg in args:
        if arg in TEST_ONLY:
            next(args)
            continue
        out.append(arg)
        if arg in PER_RUN:
            next(args)
    return out


def flags(argv: list[str]) -> dict[str, str]:
    return {a: b for a, b in itertools.pairwise(argv) if a in PER_RUN}


def compose_command(service: str) -> list[str]:
    command = SERVICES[service]["command"]
    if command[:2] == ["sh", "-c"]:
        script = command[2]
        return shlex.split(script[script.index("exec ") + len("exec ") :])
    return command


def replicas(service: str) -> int:
    return SERVICES[service].get("deploy", {}).get("replicas", 1)


def test_the_shape_runs_several_of_each_process_the_scheduler_too() -> None:
    assert {"nginx", "web", "worker", "beat", "migrate", "rabbitmq", "postgres", "redis"} <= set(
        SERVICES
    )
    schedulers = [
        name for name, service in SERVICES.items() if "room_scheduler" in service.get("command", [])
    ]
    assert schedulers == ["beat"]
    # No Celery beat: it would send every tick once more, unfenced.
    assert not any("beat" in service.get("command", []) for service in SERVICES.values())
    assert replicas("beat") >= 2 and replicas("web") >= 2 and replicas("worker") >= 2
    # One image for every process of the room, nginx included.
    for name in ("web", "worker", "beat", "migrate", "nginx"):
        assert SERVICES[name]["image"] == IMAGE, name


def test_the_processes_run_what_the_tests_run() -> None:
    web = compose_command("web")
    assert shape(web) == shape(web_command(workers=1, bind="x"))
    assert flags(web)["-b"] == "0.0.0.0:8000"
    worker = compose_command("worker")
    assert shape(worker) == shape(worker_command(concurrency=1, queue="q", node="n"))
    assert "-Q" not in worker  # production workers take the default queue
    assert shape(compose_command("beat")) == shape(scheduler_command(heartbeat="h"))
    # The image's own command is the web process's.
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.M).group(1)
    assert yaml.safe_load(cmd) == web


def test_make_run_starts_the_same_processes() -> None:
    result = subprocess.run(
        ["scripts/run_stack.sh", "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    lines = [shlex.split(line) for line in result.stdout.splitlines() if ".venv/bin/" in line]
    assert [shape(argv) for argv in lines] == [
        shape(compose_command(name)) for name in ("web", "worker", "beat", "beat")
    ]
    # Each scheduler its own heartbeat, which its healthcheck would read.
    heartbeats = [flags(argv)["--heartbeat-file"] for argv in lines[2:]]
    assert len(set(heartbeats)) == 2


def test_the_scheduler_and_worker_have_healthchecks_that_the_tests_run() -> None:
    beat = SERVICES["beat"]
    heartbeat = flags(compose_command("beat"))["--heartbeat-file"]
    check = beat["healthcheck"]["test"]
    assert check[0] == "CMD"
    assert check[1:] == [
        Path(arg).name if i == 0 else arg
        for i, arg in enumerate(scheduler_check_command(heartbeat=heartbeat))
    ]
    # The worker's: a ping through the broker to its own node (Celery's default name).
    worker = SERVICES["worker"]["healthcheck"]["test"]
    assert worker[0] == "CMD-SHELL"
    assert "celery -A config inspect ping -d celery@$$HOSTNAME" in worker[1]
    assert "-n" not in compose_command("worker")


def _settings_reads() -> set[str]:
    source = (ROOT / "config" / "settings.py").read_text()
    return set(re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', source))


def test_every_variable_given_to_the_app_is_read_by_it() -> None:
    read = _settings_reads() | {"PROMETHEUS_MULTIPROC_DIR"}  # read by prometheus_client
    assert set(APP_ENV) <= read, set(APP_ENV) - read
    # The settings the edge test runs the room with behind nginx are production's.
    behind_nginx = ("DJANGO_DEBUG", "DJANGO_BEHIND_TLS_PROXY", "WR_TRUSTED_PROXY_COUNT")
    for name in (*behind_nginx, "WR_SERVE_STATIC"):
        assert APP_ENV[name] == PRODUCTION[name], name


def test_the_room_talks_to_the_services_of_the_shape() -> None:
    assert APP_ENV["CELERY_BROKER_URL"].startswith("amqp://")
    assert "@rabbitmq:5672/" in APP_ENV["CELERY_BROKER_URL"]
    assert APP_ENV["REDIS_URL"].startswith("redis://redis:6379/")
    assert APP_ENV["CHANNELS_REDIS_URL"].startswith("redis://redis:6379/")
    assert "@postgres:5432/" in APP_ENV["DATABASE_URL"]
    redis = " ".join(SERVICES["redis"]["command"])
    assert "--maxmemory-policy noeviction" in redis and "--appendonly yes" in redis


def test_nginx_runs_the_tested_configuration() -> None:
    nginx = SERVICES["nginx"]
    assert nginx["command"] == [str(RUN.relative_to(ROOT))]
    env = nginx["environment"]
    placeholders = set(re.findall(r"@([A-Z][A-Z0-9_]*)@", TEMPLATE.read_text()))
    assert set(env) == placeholders
    assert env["NGINX_PAGES_ROOT"] == f"{APP_DIR}/{PAGES.relative_to(ROOT)}"
    assert env["NGINX_STATIC_ROOT"] == f"{APP_DIR}/{Path(settings.STATIC_ROOT).relative_to(ROOT)}"
    assert env["NGINX_WEB_SERVERS"] == "web:8000"
    assert flags(compose_command("web"))["-b"].endswith(":8000")
    assert env["WR_PUBLIC_URL"] == APP_ENV["WR_PUBLIC_URL"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"WORKDIR {APP_DIR}" in dockerfile
    assert "install -y --no-install-recommends nginx" in dockerfile
    assert "collectstatic" in dockerfile


def test_the_nginx_template_is_rendered_whole_or_not_at_all(tmp_path) -> None:
    env = {
        name: f"/{name.lower()}"
        for name in re.findall(r"@([A-Z][A-Z0-9_]*)@", TEMPLATE.read_text())
    }
    env["NGINX_WEB_SERVERS"] = "10.0.0.1:8000, 10.0.0.2:8000 10.0.0.3:8000"
    target = tmp_path / "nginx.conf"
    done = subprocess.run(
        ["python3", "deploy/nginx/render.py", str(TEMPLATE), str(target)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    assert "@" not in re.sub(r"#.*", "", text)
    servers = re.findall(r"^\s*server (\S+) max_fails", text, re.M)
    assert servers == ["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"]

    del env["NGINX_TLS_KEY"]
    refused = subprocess.run(
        ["python3", "deploy/nginx/render.py", str(TEMPLATE), str(tmp_path / "half.conf")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 1 and "NGINX_TLS_KEY" in refused.stderr
    assert not (tmp_path / "half.conf").exists()


GATE_TEMPLATE = ROOT / "deploy" / "nginx" / "gate.conf.template"


def _render_gate(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    values = {
        name: f"/{name.lower()}"
        for name in re.findall(r"@([A-Z][A-Z0-9_]*)@", GATE_TEMPLATE.read_text())
    }
    return subprocess.run(
        ["python3", "deploy/nginx/render.py", str(GATE_TEMPLATE), str(tmp_path / "gate.conf")],
        cwd=ROOT,
        env={**values, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_gate_template_takes_the_policy_for_an_unreachable_room_it_is_given(
    tmp_path,
) -> None:
    closed = _render_gate(tmp_path, GATE_UNREACHABLE="closed")
    assert closed.returncode == 0, closed.stderr
    text = (tmp_path / "gate.conf").read_text()
    assert "render_include" not in text and not re.search(r"@[A-Z][A-Z0-9_]*@", text)
    assert "location @waiting_room_unreachable {" in text and "return 503" in text
    assert "js_" not in text and "load_module" not in text  # no module needed

    # The open policy's own values are needed only when it is chosen.
    missing = _render_gate(tmp_path, GATE_UNREACHABLE="open")
    assert missing.returncode == 1
    assert "GATE_FAIL_OPEN_DIR, GATE_FAIL_OPEN_MINUTES" in missing.stderr
    opened = _render_gate(
        tmp_path, GATE_UNREACHABLE="open", GATE_FAIL_OPEN_MINUTES="5", GATE_FAIL_OPEN_DIR="/s"
    )
    assert opened.returncode == 0, opened.stderr
    text = (tmp_path / "gate.conf").read_text()
    script = ROOT / "deploy" / "nginx" / "gate-unreachable" / "unreachable.js"
    assert f"js_import waiting_room_unreachable from {script};" in text
    assert "set $waiting_room_fail_open_minutes 5;" in text
    assert "access_log /s/unchecked.log room;" in text
    assert text.index("load_module") < text.index("http {")

    unknown = _render_gate(tmp_path, GATE_UNREACHABLE="sideways")
    assert unknown.returncode == 1 and "sideways-main.conf" in unknown.stderr


CLUSTER = yaml.safe_load((ROOT / "docker-compose.cluster.yml").read_text())


def test_the_cluster_variant_matches_the_tested_cluster() -> None:
    from scripts.redis_cluster import MASTERS, REPLICAS_PER_MASTER

    services = CLUSTER["services"]
    nodes = sorted(name for name in services if re.fullmatch(r"redis-\d+", name))
    assert len(nodes) == MASTERS * (1 + REPLICAS_PER_MASTER)
    for name in nodes:
        command = " ".join(services[name]["command"])
        assert "--cluster-enabled yes" in command
        assert "--maxmemory-policy noeviction" in command and "--appendonly yes" in command
    create = " ".join(services["redis-cluster"]["command"])
    assert f"--cluster-replicas {REPLICAS_PER_MASTER}" in create
    assert all(f"{name}:6379" in create for name in nodes)
    # Every process of the room runs on the cluster, after it is formed; pub/sub stays on
    # the plain Redis of docker-compose.yml.
    for app in ("migrate", "web", "worker", "beat"):
        env = services[app]["environment"]
        assert env["REDIS_CLUSTER"] == "1"
        seeds = [
            seed.removeprefix("redis://").partition(":")[0] for seed in env["REDIS_URL"].split(",")
        ]
        assert set(seeds) <= set(nodes)
        assert env["CHANNELS_REDIS_URL"].startswith("redis://redis:6379/")
        assert "redis-cluster" in services[app]["depends_on"]
        assert app in SERVICES


def test_the_settings_accept_the_cluster_variant_and_refuse_it_half_given() -> None:
    env = CLUSTER["x-cluster-env"]
    base = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REDIS_CLUSTER": env["REDIS_CLUSTER"],
        "REDIS_URL": env["REDIS_URL"],
    }
    read = (
        "from django.conf import settings; "
        "print(settings.CACHES['default']['OPTIONS']['CONNECTION_FACTORY'])"
    )

    def settings_with(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ROOT / ".venv/bin/python"), "-c", read],
            cwd=ROOT,
            env={**base, **extra},
            capture_output=True,
            text=True,
        )

    whole = settings_with(
        CHANNELS_REDIS_URL=env["CHANNELS_REDIS_URL"],
        CELERY_BROKER_URL=APP_ENV["CELERY_BROKER_URL"].replace(
            "${RABBITMQ_PASSWORD:-waitingroom}", "x"
        ),
    )
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.strip() == "queueing.hot.cluster.ClusterConnectionFactory"
    no_pubsub = settings_with(CELERY_BROKER_URL="amqp://x@rabbitmq//")
    assert no_pubsub.returncode != 0 and "CHANNELS_REDIS_URL" in no_pubsub.stderr
    no_broker = settings_with(CHANNELS_REDIS_URL="redis://redis:6379/0")
    assert no_broker.returncode != 0 and "CELERY_BROKER_URL" in no_broker.stderr
