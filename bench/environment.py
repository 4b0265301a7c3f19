"""Where the benchmarks run: the project's settings for them, their database and Redis
database, the load generators they need on the machine, and the machine itself.

Shared by bench/run.py, bench/unit_costs.py and (through bench/run.py) rehearsal/run.py;
Django need not be set up to import it.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Another database and Redis database (both emptied at the start) for a run beside another.
DB_NAME = os.environ.get("WR_BENCH_DATABASE", "waitingroom_bench")
REDIS_DB = int(os.environ.get("WR_BENCH_REDIS_DB", "14"))

ENV = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{DB_NAME}",
    "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
    "WR_REDIS_PREFIX": "bench",
    "CHANNELS_PREFIX": "bench:asgi",
    "CELERY_TASK_DEFAULT_QUEUE": "bench",
    # Production settings, minus HTTPS (there is no TLS proxy on loopback).
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "bench-" + uuid.uuid4().hex * 2,
    # The bench's database is emptied at the start: a key of its own for its pass keys.
    "WR_PASS_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    "DJANGO_SSL_REDIRECT": "0",
    "DJANGO_SECURE_COOKIES": "0",
    "DJANGO_HSTS_SECONDS": "0",
    "DJANGO_HSTS_PRELOAD": "0",
    # One load generator on one address stands for many fans.
    "WR_JOIN_LIMIT_PER_IP": "0",
    "WR_JOIN_LIMIT_PER_IDENTITY": "0",
    "WR_SOCKETS_PER_ADDRESS": "0",
    "LOG_LEVEL": "WARNING",
}


def stack_env() -> dict[str, str]:
    """The environment of the servers a benchmark starts (web, worker, beat)."""
    # Unbuffered: a log read while its process runs, or after it was stopped, holds all it
    # printed (the box office counts Celery's lines in the worker's).
    return {**os.environ, **ENV, "PYTHONUNBUFFERED": "1"}


def sh(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


def ensure_tools() -> None:
    missing = [tool for tool in ("wrk", "hey") if shutil.which(tool) is None]
    if missing:
        print(f"installing {', '.join(missing)} with apt-get", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", *missing],
            check=True,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )


def fresh_database(name: str = DB_NAME, env: dict[str, str] = ENV) -> None:
    """An empty, migrated database ``name`` and an empty Redis database (``env``'s
    REDIS_URL); bench/unit_costs.py passes its own."""
    subprocess.run(
        # --force: the benchmark's own connections (and a server's leftovers) are let go.
        ["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", "--force", name],
        check=True,
    )
    sh("createdb", "-h", "127.0.0.1", "-U", "postgres", name)
    sh("redis-cli", "-u", env["REDIS_URL"], "flushdb")
    sh(str(BIN / "python"), "manage.py", "migrate", "-v0", cwd=ROOT, env={**os.environ, **env})


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }
