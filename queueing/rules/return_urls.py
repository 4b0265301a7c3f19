"""Where an admitted fan is sent: back to the shop page they first asked for, or the on-sale's
target URL. Never an open redirect: a return URL is used only when its host is the target
URL's host or one the on-sale lists in ``allowed_return_hosts`` (docs/api.md, "Fans")."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from events.validation import return_host_normalise

RETURN_URL_MAX_LENGTH = 2000


def _netloc_host(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        hostname, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not hostname or parts.username or parts.password:
        return None
    return hostname if port is None else f"{hostname}:{port}"


def return_url_clean(raw: object) -> str:
    """A return URL as kept with a join: an absolute http(s) URL with a host, or "" (anything
    else is dropped, not refused: a fan is never turned away for a bad link)."""
    if not isinstance(raw, str) or len(raw) > RETURN_URL_MAX_LENGTH:
        return ""
    url = raw.strip()
    if any(ch in url for ch in "\r\n\t\\") or _netloc_host(url) is None:
        return ""
    return url


def admitted_destination(*, return_url: str, target_url: str, allowed_hosts: Iterable[str]) -> str:
    """The URL the admitted fan goes to (before the pass is added): ``return_url`` when its
    host (with its port, if any) is the target URL's or an allowed one, else ``target_url``."""
    if not return_url:
        return target_url
    host = _netloc_host(return_url)
    allowed = {_netloc_host(target_url), *allowed_hosts}
    return return_url if host is not None and host in allowed else target_url


def destination_sources(*, target_url: str, allowed_hosts: Iterable[str]) -> list[str]:
    """Every origin ``admitted_destination`` may send a fan to, as Content-Security-Policy
    source expressions: the target URL's host and each allowed one, over https and http (the
    return URL's scheme is the fan's; only its host is checked). The room's pages allow their
    forms these: a browser holds a form's whole redirect chain to ``form-action``, and a join
    admitted at once ends in a redirect to the shop."""
    sources: list[str] = []
    for host in (_netloc_host(target_url), *allowed_hosts):
        # Only plain hosts: nothing else may reach a header.
        if host is None or return_host_normalise(host) != host:
            continue
        for scheme in ("https", "http"):
            if (source := f"{scheme}://{host}") not in sources:
                sources.append(source)
    return sources
