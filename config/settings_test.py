"""Test overlay: the same settings, with what a test run needs changed.

Tests use their own Redis database (15) so that flushing it in a fault test cannot touch a
developer's running room, and each test gets its own key prefix (tests/conftest.py).
"""

import os
import uuid

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
# Pub/sub channels are not per Redis database: a test run of its own prefix, so that two runs on
# one machine (each on its own PostgreSQL database) never hear each other's ticks. The server
# processes a test starts are handed this prefix (tests/processes.py).
os.environ.setdefault("CHANNELS_PREFIX", f"wrtest:{uuid.uuid4().hex[:8]}:asgi")
# pytest-xdist's workers inherit the environment of the process that started them, the prefix
# above included: each adds its own name, or the two would hear each other's ticks (and their
# databases' on-sale ids, hence group names, repeat).
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["CHANNELS_PREFIX"] += f":{worker}"
# The test process is single-threaded; the server processes tests start use the pool.
os.environ.setdefault("DATABASE_POOL_MAX", "0")

from config.settings import *  # noqa: F403

# Fast hashing in tests; PBKDF2 too, for users that server processes must log in.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
