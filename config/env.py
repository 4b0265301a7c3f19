"""Typed readers for settings taken from the environment.

Each helper fails loudly (ImproperlyConfigured) on a value it cannot parse, so a typo in a
deployment is a start-up error rather than a silently wrong setting. Secrets (``env_secret``)
may instead be given in a file named by ``<NAME>_FILE`` (Docker and Kubernetes secrets), so that
they need not sit in the process's environment. docs/configuration.md lists every variable.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import dj_database_url
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
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


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default).strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_group_map(name: str, *, roles: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``provider-group:role,other-group:role`` as {provider group: its roles}. A group may
    appear twice (two roles); a role not in ``roles`` is an error, not a silent no-access."""
    mapping: dict[str, tuple[str, ...]] = {}
    for item in env_list(name, []):
        group, colon, role = item.rpartition(":")
        group, role = group.strip(), role.strip()
        if not colon or not group or role not in roles:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not 'provider-group:role' with a role among "
                f"{', '.join(roles)}"
            )
        mapping[group] = (*mapping.get(group, ()), role)
    return mapping


def env_secret(name: str, default: str) -> str:
    """``name``'s value, or the content of the file ``<name>_FILE`` names (one trailing newline
    dropped, as editors and ``echo`` add one). Both set is an error: which one wins would be a
    guess."""
    path = os.environ.get(f"{name}_FILE")
    if path is None:
        return os.environ.get(name, default)
    if name in os.environ:
        raise ImproperlyConfigured(f"set {name} or {name}_FILE, not both")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {reason}") from exc
    return text.removesuffix("\n").removesuffix("\r")


def database_from_url(url: str) -> dict[str, Any]:
    """Django DATABASES entry from ``postgres://user:password@host:port/name?option=value``.

    Parsed by dj-database-url: the query string's libpq parameters (``sslmode``,
    ``sslrootcert``, ``options``, ``connect_timeout``, ``application_name``...) are in
    ``OPTIONS``, where psycopg passes them on to libpq."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL must be postgres://..., got scheme {parts.scheme!r}"
        )
    if not parts.path.lstrip("/"):
        raise ImproperlyConfigured("DATABASE_URL must name a database")
    try:
        parsed = dj_database_url.parse(url)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL cannot be parsed: {exc}") from exc
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parsed.get("NAME") or "",
        "USER": parsed.get("USER") or "",
        "PASSWORD": parsed.get("PASSWORD") or "",
        "HOST": parsed.get("HOST") or "",
        "PORT": str(parsed.get("PORT") or 5432),
        "OPTIONS": dict(parsed.get("OPTIONS") or {}),
    }


def database_options(url_options: dict[str, Any], room: dict[str, Any]) -> dict[str, Any]:
    """The room's connection options (``room``) with the URL's (``url_options``) over them:
    a parameter the URL names is the operator's word for this database and wins, except
    ``options`` (server settings, ``-c name=value`` each), which is joined, the room's first:
    PostgreSQL applies them in order, so a setting the URL repeats (its own
    ``idle_in_transaction_session_timeout``) wins while the room's others stay."""
    merged = {**room, **url_options}
    joined = " ".join(str(o) for o in (room.get("options"), url_options.get("options")) if o)
    if joined:
        merged["options"] = joined
    if "pool" in url_options:
        raise ImproperlyConfigured(
            "DATABASE_URL may not set pool: DATABASE_POOL_MAX and DATABASE_POOL_TIMEOUT do"
        )
    return merged


def fernet_keys_checked(name: str, raw: str) -> list[str]:
    """The comma-separated Fernet keys in ``raw`` (``name``'s value), each checked now so that
    a mistyped key stops the start rather than the first pass."""
    keys = [key.strip() for key in raw.split(",") if key.strip()]
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name}: key {position} is not a Fernet key (32 url-safe base64-encoded bytes)"
            ) from exc
    return keys


def fernet_key_derived(secret: str) -> str:
    """A Fernet key derived from a secret key (HKDF-SHA256, a purpose of its own): the
    developer machine's default, never production's (DEBUG off requires a key of its own)."""
    derived = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"waitingroom.pass-key-sealing"
    ).derive(secret.encode())
    return base64.urlsafe_b64encode(derived).decode()


def networks_checked(
    name: str, cidrs: list[str]
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """``name``'s networks (``10.0.0.0/8``, ``::1/128``, or a bare address), each checked now."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {cidr!r} is not a network") from exc
    return networks
