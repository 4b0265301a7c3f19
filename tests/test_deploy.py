"""docker-compose.yml and the Dockerfile are the production shape, and nothing here runs them
(no Docker engine in CI): these checks hold them to what the tests do run. The same commands
as tests/processes.py and scripts/run_stack.sh, environment the settings read, the nginx the
edge tests run, the scheduler in two replicas with its healthcheck and the worker's; an image
of the locked production packages alone, run by an unprivileged user; exact images, no
default password, healthchecks, and PostgreSQL connections that fit its max_connections. And
the room runs with the production packages alone: every other one made impossible to import.

Longer than 350 lines on purpose: the deployment's files are read together (the image's
command is compose's, compose's pools are the budget's, the locks are the image's), so their
checks live in one place that a change to any of them runs."""

from __future__ import annotations

import fnmatch
import http.client
import importlib.metadata
import itertools
import os
import re
import shlex
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from django.conf import settings
from django.db import connection

from tests.edge import PAGES, PRODUCTION, RUN, TEMPLATE
from tests.processes import (
    ROOT,
    Stack,
    process_env,
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
            "${RABBITMQ_PASSWORD:?set RABBITMQ_PASSWORD}", "x"
        ),
    )
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout.strip() == "queueing.hot.cluster.ClusterConnectionFactory"
    no_pubsub = settings_with(CELERY_BROKER_URL="amqp://x@rabbitmq//")
    assert no_pubsub.returncode != 0 and "CHANNELS_REDIS_URL" in no_pubsub.stderr
    no_broker = settings_with(CHANNELS_REDIS_URL="redis://redis:6379/0")
    assert no_broker.returncode != 0 and "CELERY_BROKER_URL" in no_broker.stderr


# The image: two stages, the locked production packages alone, an unprivileged user.

DOCKERFILE = (ROOT / "Dockerfile").read_text()
REQUIREMENTS = ROOT / "requirements"
# What production must never carry (the tests' and tools' packages), by name.
TOOLS = {
    "pytest",
    "pytest-django",
    "pytest-timeout",
    "playwright",
    "schemathesis",
    "ruff",
    "daphne",
    "aiosmtpd",
    "hypothesis",
    "httpx",
    "import-linter",
    "polib",
    "uv",
}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _logical_lines(path: Path) -> list[str]:
    """A requirements file's requirement lines, continuations joined, comments dropped."""
    text = re.sub(r"\\\s*\n", " ", path.read_text())
    lines = (re.sub(r"(^|\s)#.*", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


def _pins(path: Path) -> dict[str, str]:
    """name -> version of every ``name==version`` line (extras and markers aside)."""
    pins = {}
    for line in _logical_lines(path):
        found = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;]+)", line)
        if found:
            pins[_normalized(found.group(1))] = found.group(3)
    return pins


def _stages() -> list[str]:
    return re.split(r"^(?=FROM )", DOCKERFILE, flags=re.M)[1:]


def test_the_image_installs_the_locked_production_packages_in_a_stage_of_their_own() -> None:
    builder, final = _stages()
    assert re.match(r"FROM \S+ AS builder\n", builder)
    install = re.search(r"^RUN .*pip install (.*)$", builder, re.M).group(1).split()
    assert "--require-hashes" in install and install[install.index("-r") + 1] == "/tmp/prod.txt"
    assert "COPY requirements/prod.txt /tmp/prod.txt" in builder
    assert "dev.txt" not in DOCKERFILE and "dev.in" not in DOCKERFILE
    # Only the builder's virtualenv goes on: no pip install, no build tools in the image.
    assert "COPY --from=builder /opt/venv /opt/venv" in final
    assert "pip install" not in final
    # Exact base images, the same in both stages.
    bases = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert len(set(bases)) == 1 and re.fullmatch(r"python:3\.11\.\d+-slim-\w+", bases[0])


def test_the_image_runs_as_an_unprivileged_user() -> None:
    _, final = _stages()
    users = re.findall(r"^USER (\S+)$", final, re.M)
    assert users, "the image would run as root"
    user, _, group = users[-1].partition(":")
    # Numeric, so that a runtime that refuses root (runAsNonRoot) can tell without /etc/passwd.
    assert user.isdigit() and int(user) >= 1000 and (not group or int(group) >= 1000)
    assert f"--uid {user}" in final
    # Nothing runs as root after the switch, and the compose services do not switch back.
    assert final.rindex("USER ") > max(final.rindex("RUN "), final.rindex("COPY "))
    assert not any("user" in service for service in SERVICES.values())
    # nginx runs as that user too: on unprivileged ports, published as the usual ones.
    env = SERVICES["nginx"]["environment"]
    listens = {int(env["NGINX_HTTP_LISTEN"]), int(env["NGINX_HTTPS_LISTEN"])}
    assert all(port >= 1024 for port in listens)
    published = {tuple(map(int, mapping.split(":"))) for mapping in SERVICES["nginx"]["ports"]}
    assert published == {(80, int(env["NGINX_HTTP_LISTEN"])), (443, int(env["NGINX_HTTPS_LISTEN"]))}


def test_production_packages_hold_no_test_or_tool_package() -> None:
    production = _pins(REQUIREMENTS / "prod.txt")
    assert not TOOLS & set(production), TOOLS & set(production)
    # Development asks for each of them (some other packages it names directly, PyYAML and
    # websockets, production needs too, through drf-spectacular and uvicorn).
    assert TOOLS <= set(_pins(REQUIREMENTS / "dev.in"))


@pytest.mark.parametrize("lock", ["prod.txt", "dev.txt"])
def test_every_locked_package_is_pinned_with_its_hashes(lock: str) -> None:
    lines = _logical_lines(REQUIREMENTS / lock)
    assert len(lines) > 20
    for line in lines:
        assert re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==\S+", line), line
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", line), line
        assert not re.search(r"\s-e\s|://|\s--(index-url|extra-index-url|find-links)", line), line


def test_the_locks_hold_what_the_in_files_ask_for() -> None:
    """An .in file changed without `make lock` fails here."""
    production, development = _pins(REQUIREMENTS / "prod.txt"), _pins(REQUIREMENTS / "dev.txt")
    for name, version in _pins(REQUIREMENTS / "prod.in").items():
        assert production.get(name) == version, name
    for name, version in _pins(REQUIREMENTS / "dev.in").items():
        assert development.get(name) == version, name
    # Development runs production's exact versions.
    assert {name: development.get(name) for name in production} == production


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves ``path`` out (its patterns here: no "!" exceptions)."""
    parts = path.split("/")
    for pattern in patterns:
        if pattern.startswith("**/"):
            if any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts):
                return True
            continue
        depth = pattern.count("/") + 1
        if fnmatch.fnmatchcase("/".join(parts[:depth]), pattern):
            return True
    return False


def test_the_image_leaves_out_tests_benchmarks_and_the_rehearsal() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not any(pattern.startswith("!") for pattern in patterns)
    left_out = [
        "tests/test_deploy.py",
        "bench/run.py",
        "rehearsal/run.py",
        ".venv/bin/python",
        ".git/HEAD",
        "docs/waiting-page.png",
        "requirements/dev.txt",
        "staticfiles/staticfiles.json",
        "queueing/__pycache__/models.cpython-311.pyc",
        ".env",
    ]
    for path in left_out:
        assert _ignored(path, patterns), path
    taken = [
        "manage.py",
        "pyproject.toml",
        "config/settings.py",
        "queueing/hot/lua/join.lua",
        "templates/base.html",
        "locale/de/LC_MESSAGES/django.mo",
        "deploy/nginx/run.sh",
        "requirements/prod.txt",
    ]
    for path in taken:
        assert not _ignored(path, patterns), path
        assert (ROOT / path).exists() or path.endswith(".lua"), path


# Compose: exact images, no default password, healthchecks, and connections that fit.

ALL_SERVICES = {**CLUSTER["services"], **SERVICES}


def _raw_compose() -> str:
    return (ROOT / "docker-compose.yml").read_text() + (
        ROOT / "docker-compose.cluster.yml"
    ).read_text()


def test_every_image_is_an_exact_release() -> None:
    images = {
        service.get("image") for service in [*SERVICES.values(), *CLUSTER["services"].values()]
    }
    images |= {CLUSTER["x-cluster-node"]["image"]}
    images.discard(None)
    for image in images - {IMAGE}:  # the room's own, built here
        name, _, tag = image.partition(":")
        # A release names every part of its version (PostgreSQL's have two), or a digest.
        parts = 2 if name == "postgres" else 3
        exact = rf"\d+(\.\d+){{{parts - 1}}}(-[a-z0-9.]+)?"
        assert re.fullmatch(exact, tag) or re.search(r"@sha256:[0-9a-f]{64}$", image), image
    # A RabbitMQ series RabbitMQ still supports (3.13's community support ended in 2024).
    assert int(SERVICES["rabbitmq"]["image"].split(":")[1].split(".")[0]) >= 4


@pytest.mark.django_db
def test_the_images_run_the_majors_the_tests_run() -> None:
    postgres = SERVICES["postgres"]["image"].split(":")[1]
    assert (
        int(postgres.split(".")[0]) == connection.cursor().connection.info.server_version // 10000
    )
    tested = redis.Redis.from_url(settings.REDIS_URL).info("server")["redis_version"]
    for image in {SERVICES["redis"]["image"], CLUSTER["x-cluster-node"]["image"]}:
        assert image.split(":")[1].split(".")[0] == tested.split(".")[0], image


def test_no_password_has_a_default() -> None:
    secrets = re.findall(r"\$\{([A-Z0-9_]*(?:PASSWORD|SECRET)[A-Z0-9_]*)([^}]*)\}", _raw_compose())
    assert {name for name, _ in secrets} >= {
        "POSTGRES_PASSWORD",
        "RABBITMQ_PASSWORD",
        "DJANGO_SECRET_KEY",
    }
    for name, rest in secrets:
        if name.endswith("_FALLBACKS"):
            # Earlier keys, set only during a rotation: empty by default, never a value.
            assert rest == ":-", f"${{{name}{rest}}} gives a default"
            continue
        assert rest.startswith(":?"), f"${{{name}{rest}}} gives a default"


def test_every_service_that_keeps_running_has_a_healthcheck() -> None:
    for name, service in ALL_SERVICES.items():
        if service.get("restart") == "no":
            continue  # a one-off run (migrate, forming the cluster): others wait for its end
        healthcheck = service.get("healthcheck") or {}
        assert healthcheck.get("test") and not healthcheck.get("disable"), name


# Each connection PostgreSQL keeps for who is not a process of the room: an operator's psql,
# pg_dump's backups, a migration run by hand. superuser_reserved_connections (3) are not
# the room's either.
HEADROOM = 20
SUPERUSER_RESERVED = 3


def _connections(scale: dict[str, int]) -> int:
    """The most connections the room's processes may open: replicas x processes x pool."""
    total = 0
    for name, service in SERVICES.items():
        env = service.get("environment", {})
        if "DATABASE_URL" not in env:
            continue
        # Explicit for every process: the settings' default (16) is for one process alone.
        pool = int(env["DATABASE_POOL_MAX"])
        argv = compose_command(name)
        if Path(argv[0]).name == "gunicorn":
            processes = int(flags(argv)["-w"])
        elif argv[0] == "celery" and "worker" in argv:
            processes = int(flags(argv)["-c"])  # prefork children; the parent runs no task
        else:
            processes = 1
        total += scale.get(name, replicas(name)) * processes * pool
    return total


def test_postgres_connections_fit_max_connections() -> None:
    command = SERVICES["postgres"]["command"]
    max_connections = int(
        next(arg for arg in command if arg.startswith("max_connections=")).partition("=")[2]
    )
    available = max_connections - SUPERUSER_RESERVED - HEADROOM
    assert _connections({}) <= available, (_connections({}), available)
    # The scale-out the compose file's head shows fits too.
    head = (ROOT / "docker-compose.yml").read_text().split("\nx-app")[0]
    scaled = {name: int(count) for name, count in re.findall(r"--scale (\w+)=(\d+)", head)}
    assert scaled and _connections(scaled) <= available, (_connections(scaled), available)
    # The README's table says the same.
    readme = (ROOT / "README.md").read_text()
    assert f"{_connections({}) + HEADROOM} of {max_connections - SUPERUSER_RESERVED}" in readme
    assert f"{_connections(scaled) + HEADROOM} of" in readme


# The production packages suffice: the room checks and serves with every other one
# unimportable.

BLOCKER = """
import sys

DEVELOPMENT_ONLY = frozenset({names!r})


# Imports of packages that requirements/prod.txt does not hold fail, as in the image.
class DevelopmentOnly:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in DEVELOPMENT_ONLY:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in prod.txt)", name=name)
        return None


sys.meta_path.insert(0, DevelopmentOnly())
"""


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: str


def _get(url: str) -> Answer:
    """A GET as nginx passes it on (over HTTPS), the path sent as it is."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("GET", parts.path, headers={"X-Forwarded-Proto": "https"})
        response = conn.getresponse()
        return Answer(response.status, response.headers, response.read().decode(errors="replace"))
    finally:
        conn.close()


def development_only_modules() -> set[str]:
    """Top-level modules installed here by a package that prod.txt does not hold (dev.txt's,
    or any other), but for the virtualenv's own pip and setuptools, which the image's has."""
    production = set(_pins(REQUIREMENTS / "prod.txt")) | {"pip", "setuptools"}
    owners = importlib.metadata.packages_distributions()
    return {
        module
        for module, distributions in owners.items()
        if not {_normalized(d) for d in distributions} & production
    }


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_the_room_runs_on_the_production_packages_alone(make_event, tmp_path) -> None:
    blocked = development_only_modules()
    assert {"pytest", "playwright", "schemathesis", "hypothesis", "httpx", "daphne"} <= blocked
    (tmp_path / "sitecustomize.py").write_text(BLOCKER.format(names=sorted(blocked)))
    env = process_env(**{**PRODUCTION, "WR_SERVE_STATIC": "1"}, PYTHONPATH=str(tmp_path))

    def python(*code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )

    refused = python("-c", "import pytest")
    assert refused.returncode != 0 and "not in prod.txt" in refused.stderr
    # Every module of the room imports (management commands, tasks, migrations included).
    every_module = (
        "import pkgutil, importlib, django; django.setup()\n"
        "for app in ('config', 'events', 'queueing', 'staff', 'dashboard'):\n"
        "    package = importlib.import_module(app)\n"
        "    for module in pkgutil.walk_packages(package.__path__, app + '.'):\n"
        "        importlib.import_module(module.name)\n"
    )
    imported = python("-c", every_module)
    assert imported.returncode == 0, imported.stderr[-3000:]
    checked = python("manage.py", "check", "--deploy", "--fail-level", "WARNING")
    assert checked.returncode == 0, checked.stdout + checked.stderr

    make_event(slug="prod-only")
    stack = Stack(env, tmp_path)
    try:
        base_url = stack.web(workers=1)  # waits for /healthz
        page = _get(f"{base_url}/e/prod-only/")
        assert page.status == 200
        # Without nginx (WR_SERVE_STATIC=1) the web process serves the hashed names itself,
        # as nginx does: kept a year.
        css = re.search(r"/static/queueing/waiting\.[0-9a-f]{12}\.css", page.body).group()
        hashed = _get(f"{base_url}{css}")
        assert hashed.status == 200 and hashed.body.startswith("/* Contrast")
        assert hashed.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        plain = _get(f"{base_url}/static/queueing/waiting.css")
        assert plain.status == 200 and "immutable" not in plain.headers.get("Cache-Control", "")
        assert _get(f"{base_url}/static/../manage.py").status == 404
    finally:
        stack.stop()
    assert "not in prod.txt" not in stack.log("web")


def test_the_images_build_step_loads_the_production_settings(tmp_path) -> None:
    """collectstatic as the Dockerfile runs it, with exactly the variables its RUN line sets:
    a setting production requires (a key, say) that the build step does not give fails the
    build."""
    _, final = _stages()
    step = re.search(
        r"^RUN (DJANGO_DEBUG=0 .*?python manage\.py collectstatic)", final, re.M | re.S
    )
    assert step, "the image collects its static files with DEBUG off"
    assignments = dict(re.findall(r"([A-Z_]+)=(\S+)", step.group(1).replace("\\\n", " ")))
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_STATIC_ROOT": str(tmp_path),
        **assignments,
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    assert (tmp_path / "staticfiles.json").exists()
