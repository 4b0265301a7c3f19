"""The shop's side of the room: where an admitted fan is sent, and the gate's answers.

Where an admitted fan is sent: back to the shop page they first asked for, or the on-sale's
target URL. Never an open redirect: a return URL is used only when its host is the target
URL's host or one the on-sale lists in ``allowed_return_hosts`` (docs/api.md, "Fans").

The gate's answer to a web server's sub-request (``GET /gate/{slug}/check``, nginx
``auth_request``), as far as it needs no I/O: reading the original request the web server
describes in headers, the cookie that carries a pass on the shop's host, and the headers of
the two answers (docs/api.md, "Protected sites"; docs/gate-nginx.md); and the request the
on-sale's traffic rules judge (``traffic_request``), with the answers they give before any
pass is looked at: a bypass (204, no pass needed) and a block (403).

Everything here comes from the client or a web server in front of it, so nothing it builds
may leave the shop's host or break a header: the original URL is percent-encoded down to
RFC 3986 characters, its path starts with exactly one slash, and the host is used only when
it is a plain DNS name or IPv4 address (with a port).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, quote_from_bytes, unquote_plus, unquote_to_bytes, urlsplit

from events.traffic_rules import Address, TrafficRequest
from events.validation import return_host_normalise

# The query parameter an admitted fan arrives with (the pass's redirect_url).
PASS_QUERY_PARAMETER = "wr_pass"
# One cookie per on-sale: a shop may put several on-sales in front of different pages.
GATE_COOKIE_PREFIX = "wr_pass_"
# The header of a 204 that asks the web server to send the fan to this URL (the original
# one without wr_pass) instead of serving the page; of a 401, where the room is.
REDIRECT_HEADER = "X-Waiting-Room-Redirect"
LOCATION_HEADER = "X-Waiting-Room-Location"
# Passes tried per request at most (the query's, then cookies of the gate's name): each
# costs a signature check, and a request stuffed with forged cookies must not cost more.
MAX_CANDIDATES = 3
# A longer original URI is treated as "/": no shop page is that long, and the room keeps
# return URLs of at most RETURN_URL_MAX_LENGTH characters anyway.
ORIGINAL_URI_MAX_LENGTH = 8192

# What may stay as it is in a path and query (RFC 3986's unreserved and reserved characters,
# and "%" for escapes already there); everything else is percent-encoded. Left out on
# purpose: "\" (browsers read "/\host" as "//host"), "#", quotes, angle brackets, spaces and
# control characters (a CR or LF can never reach a header).
_URI_SAFE = "/?:@!$&'()*+,;=-._~%"


def gate_cookie_name(slug: str) -> str:
    """The cookie of ``slug``'s pass on the shop's host (a slug is a valid cookie name)."""
    return f"{GATE_COOKIE_PREFIX}{slug}"


@dataclass(frozen=True, slots=True)
class OriginalRequest:
    """The request the web server asks about, as far as the gate uses it."""

    scheme: str  # "https" or "http"
    host: str | None  # lower case, with a port if any; None when missing or not a plain host
    target: str  # path and query, without wr_pass, starting with exactly one "/"
    query_pass: str | None  # the last wr_pass of the query
    had_pass_parameter: bool  # wr_pass was in the query (even empty or invalid)

    @property
    def url(self) -> str | None:
        """The original URL without wr_pass; None without a usable host."""
        if self.host is None:
            return None
        return f"{self.scheme}://{self.host}{self.target}"


def original_request_read(
    *, uri: str | None, host: str | None, proto: str | None
) -> OriginalRequest:
    """The original request from what the web server passes: ``X-Original-URI`` (missing:
    "/"), the shop's host (``X-Original-Host``, else ``X-Forwarded-Host``) and its scheme
    (``X-Original-Proto``; missing or unknown: https). Header values arrive as Latin-1
    text, one character per byte, and are percent-encoded byte for byte."""
    raw = uri if uri and len(uri) <= ORIGINAL_URI_MAX_LENGTH else "/"
    encoded = quote_from_bytes(raw.encode("latin-1", errors="replace"), safe=_URI_SAFE)
    if not encoded.startswith("/"):
        encoded = "/"  # an absolute-form or "*" target: no shop page of its own
    path, question, query = encoded.partition("?")
    # "//evil.example/" would be another host wherever the URL is used relative.
    path = "/" + path.lstrip("/")
    kept: list[str] = []
    query_pass: str | None = None
    had_pass_parameter = False
    for field in query.split("&") if question else ():
        name, _, value = field.partition("=")
        if unquote_plus(name) == PASS_QUERY_PARAMETER:
            had_pass_parameter = True
            query_pass = unquote_plus(value) or None
        elif field:
            kept.append(field)
    target = f"{path}?{'&'.join(kept)}" if kept else path
    return OriginalRequest(
        scheme=_scheme(proto),
        host=return_host_normalise(_first(host)) if host else None,
        target=target,
        query_pass=query_pass,
        had_pass_parameter=had_pass_parameter,
    )


def _first(value: str) -> str:
    """The first of a comma-separated header's values (proxies append theirs)."""
    return value.split(",", 1)[0].strip()


def _scheme(proto: str | None) -> str:
    scheme = _first(proto).lower() if proto else ""
    return scheme if scheme in ("http", "https") else "https"


def cookie_passes(cookie_headers: list[str], slug: str) -> list[str]:
    """The values of the gate's cookie for ``slug`` in the request's Cookie headers."""
    name = gate_cookie_name(slug)
    found = []
    for header in cookie_headers:
        for pair in header.split(";"):
            key, equals, value = pair.strip().partition("=")
            if equals and key == name and value:
                found.append(value.strip('"'))
    return found


def pass_candidates(original: OriginalRequest, cookies: list[str]) -> list[tuple[str, bool]]:
    """The passes to try, in order, each with whether it came from the query: a pass just
    handed over in the URL is newer than any cookie."""
    candidates = [(original.query_pass, True)] if original.query_pass else []
    candidates += [(value, False) for value in cookies]
    return candidates[:MAX_CANDIDATES]


@dataclass(frozen=True, slots=True)
class GateAnswer:
    """204 (``admitted``) or 401, with the headers the web server acts on."""

    admitted: bool
    headers: tuple[tuple[str, str], ...]

    @property
    def status(self) -> int:
        return 204 if self.admitted else 401


REFUSED_BODY = {"error": "unauthorized", "detail": "No valid pass for this on-sale."}


# Both answers depend on the fan's cookie, and the 204 may set it to a pass: a cache in front
# (nginx's proxy_cache, say) must not keep them, nor hand one fan's answer to another.
_KEPT_OUT_OF_CACHES = (("Cache-Control", "private, no-store"), ("Vary", "Cookie"))


def gate_admit(
    *,
    original: OriginalRequest,
    slug: str,
    token: str,
    from_query: bool,
    expires_at: float,
    now: float,
) -> GateAnswer:
    """The 204. A pass from the query becomes the cookie (until the pass expires), and a
    URL that carried wr_pass is to be asked again without it."""
    headers: list[tuple[str, str]] = list(_KEPT_OUT_OF_CACHES)
    if from_query:
        max_age = max(1, int(expires_at - now))
        headers.append(("Set-Cookie", pass_cookie(slug, token, max_age, original.scheme)))
    if original.had_pass_parameter:
        headers.append((REDIRECT_HEADER, original.url or original.target))
    return GateAnswer(admitted=True, headers=tuple(headers))


def pass_cookie(slug: str, token: str, max_age: int, scheme: str) -> str:
    """Host-only (no Domain), for the whole site, out of scripts' reach, sent on top-level
    navigations from the room (Lax), and only over HTTPS when the shop was asked over HTTPS."""
    cookie = f"{gate_cookie_name(slug)}={token}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Lax"
    return f"{cookie}; Secure" if scheme == "https" else cookie


def gate_refuse(*, original: OriginalRequest, slug: str, public_url: str) -> GateAnswer:
    """The 401, with where the web server sends the fan: the on-sale's waiting page, with the
    original URL (without wr_pass) to come back to once admitted, when there is a usable one."""
    return GateAnswer(
        admitted=False,
        headers=(
            *_KEPT_OUT_OF_CACHES,
            (LOCATION_HEADER, room_location(public_url=public_url, slug=slug, original=original)),
        ),
    )


def room_location(*, public_url: str, slug: str, original: OriginalRequest) -> str:
    location = f"{public_url}/e/{slug}/"
    url = original.url
    if url is not None and return_url_clean(url) == url:
        location += "?return=" + quote(url, safe="")
    return location


# ------------------------------------------------------------------ traffic rules

# The header that carries the fan's address to the check (nginx: $remote_addr, after its
# realip module resolved the trusted proxies in front of it; docs/gate-nginx.md).
CLIENT_ADDRESS_HEADER = "X-Original-Remote-Addr"
BLOCKED_BODY = {"error": "traffic_blocked", "detail": "This request is refused by the on-sale."}


def client_address_read(value: str | None) -> Address | None:
    """The fan's address as the web server wrote it: a bare IPv4 or IPv6 address (nginx's
    $remote_addr), else None (an ``ip`` condition then matches nothing)."""
    if not value:
        return None
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        return None
    return address


def rules_path(uri: str | None) -> str:
    """The path the rules' ``path`` globs are matched against, from the original request
    target: without the query, percent-decoded (UTF-8), repeated slashes merged and dot
    segments resolved, as nginx routes it. A bypass for ``/static/*`` must not open
    ``/static/../checkout`` or ``/static/%2e%2e/checkout``: both are ``/checkout`` here."""
    raw = uri if uri and len(uri) <= ORIGINAL_URI_MAX_LENGTH else "/"
    path = raw.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):
        return "/"  # an absolute-form or "*" target: no shop page of its own
    decoded = unquote_to_bytes(path.encode("latin-1", errors="replace")).decode(
        "utf-8", errors="replace"
    )
    segments: list[str] = []
    parts = decoded.split("/")[1:]
    for index, segment in enumerate(parts):
        last = index == len(parts) - 1
        if segment == "..":
            if segments:
                segments.pop()
            if last:
                segments.append("")  # "/a/.." is the directory "/"
        elif segment == ".":
            if last:
                segments.append("")
        elif segment or last:
            segments.append(segment)  # empty segments merged, a trailing slash kept
    return "/" + "/".join(segments)


def cookies_read(cookie_headers: Iterable[str]) -> dict[str, str]:
    """Every cookie of the request by name (the first of a repeated name: a browser sends
    the most specific path first), values as sent."""
    found: dict[str, str] = {}
    for header in cookie_headers:
        for pair in header.split(";"):
            key, equals, value = pair.strip().partition("=")
            if equals and key:
                found.setdefault(key.strip(), value.strip())
    return found


def traffic_request(
    *, headers: dict[str, str], cookie_headers: Iterable[str], address: Address | None
) -> TrafficRequest:
    """The request the rules judge, from the check's headers (lower-case names, repeated
    ones joined with "," as Django joins them): the web server forwards the fan's own
    headers and cookies with its sub-request, and adds X-Original-URI and the address."""
    return TrafficRequest(
        address=address,
        path=rules_path(headers.get("x-original-uri")),
        headers=headers,
        cookies=cookies_read(cookie_headers),
        user_agent=headers.get("user-agent", ""),
    )


def gate_bypass() -> GateAnswer:
    """The 204 of a request a rule lets through without a pass: nothing to set, nowhere
    else to go."""
    return GateAnswer(admitted=True, headers=_KEPT_OUT_OF_CACHES)


# ------------------------------------------------------ where an admitted fan goes

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


# Never in a kept return URL: control characters (a CR or LF would break the header it ends
# up in, and PostgreSQL cannot store NUL), lone surrogates (no UTF-8 form: PostgreSQL
# cannot store them either) and "\" (browsers read "/\host" as "//host").
_NOT_IN_A_RETURN_URL = re.compile(r"[\x00-\x1f\x7f-\x9f\\\ud800-\udfff]")


def return_url_clean(raw: object) -> str:
    """A return URL as kept with a join: an absolute http(s) URL with a host, or "" (anything
    else is dropped, not refused: a fan is never turned away for a bad link)."""
    if not isinstance(raw, str) or len(raw) > RETURN_URL_MAX_LENGTH:
        return ""
    url = raw.strip()
    if _NOT_IN_A_RETURN_URL.search(url) or _netloc_host(url) is None:
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
