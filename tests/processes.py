"""Run the real processes (gunicorn with uvicorn workers, Celery worker, the room's scheduler)
against the test database and this test's Redis prefix."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def celery_queue() -> str:
    """The Celery queue of this test's processes, so that no other worker takes its tasks."""
    return f"{settings.WR_REDIS_PREFIX}:celery"


def process_env(**extra: str) -> dict[str, str]:
    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "REDIS_URL": settings.REDIS_URL,
            "WR_REDIS_PREFIX": settings.WR_REDIS_PREFIX,
            "CHANNELS_PREFIX": settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
            "CELERY_TASK_DEFAULT_QUEUE": celery_queue(),
            "WR_LAYOUT_CACHE_SECONDS": "0.5",
            "PYTHONUNBUFFERED": "1",
            "DATABASE_POOL_MAX": "16",
            # Load tests join hundreds of times from 127.0.0.1 (and storm one identity);
            # rate-limit tests set their own limits.
            "WR_JOIN_LIMIT_PER_IP": "0",
            "WR_JOIN_LIMIT_PER_IDENTITY": "0",
        }
    )
    env.update(extra)
    # With DEBUG off, pages ask for the hashed names of collectstatic's manifest, as in the image.
    if env.get("DJANGO_DEBUG", "1").strip().lower() in {"0", "false", "no", "off", ""}:
        env.setdefault("DJANGO_STATIC_ROOT", str(production_static_root()))
        # Required with DEBUG off; the test process's own keys, so both open the same pass keys.
        env.setdefault("WR_PASS_KEY_ENCRYPTION_KEY", ",".join(settings.WR_PASS_KEY_ENCRYPTION_KEYS))
    return env


@functools.cache
def production_static_root() -> Path:
    """collectstatic's output under production settings, once per test run: what the image
    holds (each file also under its content's hash, and the manifest of those names), readable
    by nginx's workers."""
    root = Path(tempfile.mkdtemp(prefix="wr-static-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    root.chmod(0o755)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "collectstatic-only-0123456789-abcdefghijklmnopqrstuvwxyz",
        "DJANGO_STATIC_ROOT": str(root),
        "WR_PASS_KEY_ENCRYPTION_KEY": ",".join(settings.WR_PASS_KEY_ENCRYPTION_KEYS),
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )
    return root


# The command lines of the processes, as docker-compose.yml runs them in production
# (tests/test_deploy.py holds the two in agreement); only the values given here differ.


def web_command(*, workers: int, bind: str) -> list[str]:
    return [
        str(BIN / "gunicorn"),
        "config.asgi:application",
        *("-k", "config.workers.UvicornWorker"),
        *("-w", str(workers), "-b", bind),
        # Tests stop their servers often; production gives requests longer.
        *("--graceful-timeout", "2"),
        # Its default path is shared by every gunicorn on the machine.
        "--no-control-socket",
    ]


def worker_command(*, concurrency: int, queue: str, node: str) -> list[str]:
    return [
        str(BIN / "celery"),
        # --quiet: no banner, so that every line is a log line (LOG_FORMAT=json: JSON).
        *("-A", "config", "--quiet", "worker", "-l", "info", "-c", str(concurrency)),
        # The test's own queue and node name (production's is the default queue).
        *("-Q", queue, "-n", node),
        *("--without-gossip", "--without-mingle"),
    ]


def scheduler_command(*, heartbeat: str) -> list[str]:
    """One replica of the room's scheduler (queueing/scheduler.py), the beat of the room."""
    return [
        str(BIN / "python"),
        *("manage.py", "room_scheduler", "--heartbeat-file", heartbeat),
    ]


def scheduler_check_command(*, heartbeat: str) -> list[str]:
    """The scheduler's healthcheck: exits 1 unless its loop reached PostgreSQL lately."""
    return [*scheduler_command(heartbeat=heartbeat), "--check"]


def _celery_beat_command(*, schedule: str) -> list[str]:
    # The room before its scheduler (bench/far_back.py runs an earlier source tree).
    return [str(BIN / "celery"), *("-A", "config", "beat", "-l", "info", "-s", schedule)]


class Stack:
    def __init__(self, env: dict[str, str], logdir: Path, *, root: Path = ROOT) -> None:
        self.env = env
        self.logdir = logdir
        # The source tree the processes run (bench/far_back.py runs an earlier one's).
        self.root = root
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.base_url = ""

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        # Appended to: a process started again under its name keeps the earlier lines.
        log = open(self.logdir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            argv,
            cwd=self.root,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def web_at_public_url(self, workers: int = 2) -> str:
        """A server that knows its own address as WR_PUBLIC_URL (passes' issuer, JWKS URL)."""
        port = free_port()
        self.env["WR_PUBLIC_URL"] = f"http://127.0.0.1:{port}"
        return self.web(workers=workers, port=port)

    def web(self, workers: int = 2, port: int | None = None, name: str = "web") -> str:
        port = port or free_port()
        self.start(name, web_command(workers=workers, bind=f"127.0.0.1:{port}"))
        self.base_url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _healthy(self.base_url), timeout=30, what="web server")
        return self.base_url

    def worker(self, name: str = "worker", concurrency: int = 2) -> subprocess.Popen[bytes]:
        queue = self.env["CELERY_TASK_DEFAULT_QUEUE"]
        return self.start(
            name,
            worker_command(concurrency=concurrency, queue=queue, node=f"{name}-{os.getpid()}@%h"),
        )

    def beat(self, name: str = "beat") -> subprocess.Popen[bytes]:
        """A replica of the room's scheduler; start two (by name) for the redundant shape."""
        if not (self.root / "queueing" / "management" / "commands" / "room_scheduler.py").exists():
            return self.start(
                name, _celery_beat_command(schedule=str(self.logdir / f"{name}-schedule"))
            )
        return self.start(name, scheduler_command(heartbeat=self.heartbeat(name)))

    def heartbeat(self, name: str) -> str:
        """The heartbeat file of the scheduler started as ``name``."""
        return str(self.logdir / f"{name}.heartbeat")

    def log(self, name: str) -> str:
        return (self.logdir / f"{name}.log").read_text(errors="replace")

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/healthz", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def wait_until(check, *, timeout: float, what: str, interval: float = 0.1):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@contextmanager
def running_stack(**env: str) -> Iterator[Stack]:
    with tempfile.TemporaryDirectory(prefix="wr-stack-") as tmp:
        stack = Stack(process_env(**env), Path(tmp))
        try:
            yield stack
        except BaseException:
            for name in stack.procs:
                sys.stderr.write(f"----- {name} log -----\n{stack.log(name)[-4000:]}\n")
            raise
        finally:
            stack.stop()
