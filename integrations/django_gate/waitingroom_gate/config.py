"""The gate's settings: Django's ``WAITING_ROOM`` dict, checked once, loudly, at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from django.core.exceptions import ImproperlyConfigured

KNOWN_KEYS = frozenset(
    {
        "URL",
        "EVENT",
        "API_URL",
        "EXEMPT_PATHS",
        "COOKIE_NAME",
        "COOKIE_DOMAIN",
        "JWKS_CACHE_SECONDS",
        "JWKS_MIN_REFETCH_SECONDS",
        "JWKS_STALE_SECONDS",
        "ROOM_TIMEOUT_SECONDS",
        "LEEWAY_SECONDS",
        "ONLINE_CHECK",
        "ONLINE_CHECK_CACHE_SECONDS",
        "ONLINE_CHECK_FAIL_OPEN",
        "INTEGRATION_KEY",
        "RULES_CACHE_SECONDS",
        "TRUSTED_PROXY_COUNT",
        "FAIL_OPEN_MINUTES",
    }
)


@dataclass(frozen=True)
class GateConfig:
    room_url: str  # the room's public base URL: where fans are sent, and every pass's `iss`
    event: str  # the on-sale's slug: every pass's `aud`
    api_url: str  # where this server reaches the room (JWKS, passes/verify)
    exempt_paths: tuple[str, ...]
    cookie_name: str = "wr_pass"
    cookie_domain: str | None = None
    jwks_cache_seconds: float = 300.0
    jwks_min_refetch_seconds: float = 10.0
    jwks_stale_seconds: float = 86_400.0
    room_timeout_seconds: float = 3.0
    leeway_seconds: int = 5
    online_check: bool = False
    online_check_cache_seconds: float = 10.0
    online_check_fail_open: bool = True
    integration_key: str | None = None  # None: no traffic rules are fetched, everyone queues
    rules_cache_seconds: float = 10.0
    trusted_proxy_count: int = 0
    fail_open_minutes: float = 0.0  # 0: fail closed while the room cannot be reached

    @property
    def jwks_url(self) -> str:
        return f"{self.api_url}/.well-known/jwks.json"

    @property
    def rules_url(self) -> str:
        return f"{self.api_url}/api/v1/events/{quote(self.event, safe='')}/traffic-rules"

    @property
    def verify_url(self) -> str:
        return f"{self.api_url}/api/v1/passes/verify"


def _fail(key: str, why: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"WAITING_ROOM[{key!r}] {why}")


def _base_url(raw: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str):
        raise _fail(key, "must be the room's base URL, e.g. 'https://room.example'")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise _fail(key, f"must be an http(s) URL without query or fragment, not {value!r}")
    # The room's WR_PUBLIC_URL has no trailing slash, and it is compared to `iss` exactly.
    return value.rstrip("/")


def _number(
    raw: Mapping[str, Any], key: str, default: float, *, minimum: float, unit: str = "seconds"
) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise _fail(key, f"must be a number of {unit} >= {minimum}, not {value!r}")
    return float(value)


def _flag(raw: Mapping[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise _fail(key, f"must be True or False, not {value!r}")
    return value


def _integration_key(raw: Mapping[str, Any]) -> str | None:
    value = raw.get("INTEGRATION_KEY")
    if value is None:
        return None
    # The room's keys are URL-safe tokens; anything else cannot be sent in a header anyway.
    if not isinstance(value, str) or not value or not all("!" <= c <= "~" for c in value):
        raise _fail("INTEGRATION_KEY", "must be the on-sale's integration key, or None")
    return value


def _count(raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10:
        raise _fail(key, f"must be a whole number from 0 to 10, not {value!r}")
    return value


def _exempt_paths(raw: Mapping[str, Any]) -> tuple[str, ...]:
    value = raw.get("EXEMPT_PATHS", ())
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _fail("EXEMPT_PATHS", "must be a list of path prefixes such as '/static/'")
    for prefix in value:
        if not isinstance(prefix, str) or not prefix.startswith("/"):
            raise _fail("EXEMPT_PATHS", f"entries must start with '/', not {prefix!r}")
    return tuple(value)


def gate_config(raw: object) -> GateConfig:
    """``GateConfig`` from the ``WAITING_ROOM`` setting; ImproperlyConfigured on any bad value,
    so that a typo fails the deploy instead of silently opening (or closing) the shop."""
    if not isinstance(raw, Mapping):
        raise ImproperlyConfigured("settings.WAITING_ROOM must be a dict (see the gate's README)")
    unknown = set(raw) - KNOWN_KEYS
    if unknown:
        raise ImproperlyConfigured(f"WAITING_ROOM has unknown keys: {sorted(unknown)}")
    event = raw.get("EVENT")
    if not isinstance(event, str) or not event or "/" in event:
        raise _fail("EVENT", "must be the on-sale's slug")
    cookie_name = raw.get("COOKIE_NAME", GateConfig.cookie_name)
    if not isinstance(cookie_name, str) or not cookie_name.isidentifier():
        raise _fail("COOKIE_NAME", f"must be a plain cookie name, not {cookie_name!r}")
    cookie_domain = raw.get("COOKIE_DOMAIN")
    if cookie_domain is not None and (not isinstance(cookie_domain, str) or not cookie_domain):
        raise _fail("COOKIE_DOMAIN", "must be a domain or None")
    leeway = raw.get("LEEWAY_SECONDS", GateConfig.leeway_seconds)
    if isinstance(leeway, bool) or not isinstance(leeway, int) or not 0 <= leeway <= 300:
        raise _fail("LEEWAY_SECONDS", "must be a whole number of seconds from 0 to 300")
    room_url = _base_url(raw, "URL")
    return GateConfig(
        room_url=room_url,
        event=event,
        api_url=_base_url(raw, "API_URL", room_url),
        exempt_paths=_exempt_paths(raw),
        cookie_name=cookie_name,
        cookie_domain=cookie_domain,
        jwks_cache_seconds=_number(raw, "JWKS_CACHE_SECONDS", 300, minimum=1),
        jwks_min_refetch_seconds=_number(raw, "JWKS_MIN_REFETCH_SECONDS", 10, minimum=0),
        jwks_stale_seconds=_number(raw, "JWKS_STALE_SECONDS", 86_400, minimum=0),
        room_timeout_seconds=_number(raw, "ROOM_TIMEOUT_SECONDS", 3, minimum=0.1),
        leeway_seconds=leeway,
        online_check=_flag(raw, "ONLINE_CHECK", False),
        online_check_cache_seconds=_number(raw, "ONLINE_CHECK_CACHE_SECONDS", 10, minimum=0),
        online_check_fail_open=_flag(raw, "ONLINE_CHECK_FAIL_OPEN", True),
        integration_key=_integration_key(raw),
        rules_cache_seconds=_number(raw, "RULES_CACHE_SECONDS", 10, minimum=0.1),
        trusted_proxy_count=_count(raw, "TRUSTED_PROXY_COUNT"),
        fail_open_minutes=_number(raw, "FAIL_OPEN_MINUTES", 0, minimum=0, unit="minutes"),
    )
