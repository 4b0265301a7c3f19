"""Typed readers for settings taken from the environment.

Each helper fails loudly (ImproperlyConfigured) on a value it cannot parse, so a typo in a
deployment is a start-up error rather than a silently wrong setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

N = TypeVar("N", int, float)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _env_number(name: str, default: N, cast: Callable[[str], N], minimum: N | None) -> N:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = cast(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a {cast.__name__}, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    return _env_number(name, default, int, minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    return _env_number(name, default, float, minimum)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str) -> dict[str, object]:
    """Django DATABASES entry from ``postgres://user:password@host:port/name``."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL must be postgres://..., got scheme {parts.scheme!r}"
        )
    name = parts.path.lstrip("/")
    if not name:
        raise ImproperlyConfigured("DATABASE_URL must name a database")
    try:
        port = parts.port or 5432
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL has a bad port: {url!r}") from exc
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(name),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(port),
    }
