"""The room's release, read once when a process starts from the ``[project]`` table of
``pyproject.toml``: the one place it is written (the image carries the file). ``/healthz``
and the ``waitingroom_build_info`` metric show it, so whoever rolls a release sees which
process runs which."""

from __future__ import annotations

import platform
import tomllib
from pathlib import Path

import django
from django.core.exceptions import ImproperlyConfigured

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def release_version(pyproject: Path = PYPROJECT) -> str:
    """The ``version`` of ``[project]``; a process without it refuses to start rather than
    report a release it cannot name."""
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ImproperlyConfigured(f"the room's version: cannot read {pyproject}: {exc}") from exc
    version = project.get("version")
    if not isinstance(version, str) or not version:
        raise ImproperlyConfigured(f"the room's version: no [project] version in {pyproject}")
    return version


VERSION = release_version()
# What the build is made of, for waitingroom_build_info: fixed for the life of the process.
BUILD = {
    "version": VERSION,
    "python": platform.python_version(),
    "django": django.get_version(),
}
