"""Where the lean paths answer: the URLs ``config/urls.py`` names for the views they stand in
for, compiled into one regex per method and URLconf.

Django's ``resolve()`` costs 14-38 µs a call, one compiled regex 0.2 µs. A route is taken only
while the URL surely leads to the same view (a ``path()`` route under the prefix it is known
by, ``/api/`` or ``/gate/``, one argument, confirmed by ``resolve()`` at start); otherwise a
warning is logged and Django answers.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.test.signals import setting_changed
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RoutePattern
from prometheus_client import Histogram

from queueing.web.api_fan import join as join_view
from queueing.web.api_fan import ticket as ticket_view
from queueing.web.gate import check as gate_view
from queueing.web.latency import GATE_SECONDS, JOIN_SECONDS, STATUS_SECONDS

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeanRoute:
    """Where the URLconf mounts the view a lean path stands in for."""

    name: str  # the URL's name in the URLconf
    regex: re.Pattern[str]  # the whole path, as Django's resolver matches it
    argument: str  # the view's one keyword argument, the pattern's one group
    to_python: Callable[[str], Any]  # that argument's converter, as the resolver applies it
    seconds: Histogram


# (method, URL name, the Django view the lean path stands in for, its argument, its metric,
# the prefix its URL must keep: where that view's errors are answered as it answers them)
_LEAN_VIEWS = (
    ("GET", "api-ticket", ticket_view, "ticket", STATUS_SECONDS, "/api/"),
    ("POST", "api-join", join_view, "slug", JOIN_SECONDS, "/api/"),
    ("GET", "gate-check", gate_view, "slug", GATE_SECONDS, "/gate/"),
)


@functools.cache
def lean_routes() -> dict[str, tuple[LeanRoute, ...]]:
    """The lean routes by method, read from the URLconf once (again when ROOT_URLCONF
    changes): a request then costs one dict lookup and a regex match or two."""
    urlconf = settings.ROOT_URLCONF
    routes: dict[str, tuple[LeanRoute, ...]] = {}
    for method, name, view, argument, seconds, prefix in _LEAN_VIEWS:
        route = _route_for(urlconf, name, view, argument, seconds, prefix)
        if route is None:
            logger.warning("no lean path for %s: Django's view answers it", name)
        else:
            routes[method] = (*routes.get(method, ()), route)
    return routes


def _route_for(
    urlconf: str,
    name: str,
    view: Callable[..., Any],
    argument: str,
    seconds: Histogram,
    prefix: str,
) -> LeanRoute | None:
    """The route of the first URL named ``name``, if it surely leads to ``view`` with only
    ``argument``; None otherwise (that URL is then Django's alone, which is always right)."""
    found = _named_url(get_resolver(urlconf).url_patterns, name, "/", "^/", {})
    if found is None:
        return None
    endpoint, template, pattern, converters = found
    regex = re.compile(pattern)
    if (
        endpoint.callback is not view
        or endpoint.default_args
        or set(regex.groupindex) != {argument}
        or argument not in converters
    ):
        return None
    # The URL as it would be requested, to check with Django itself that nothing mounted
    # before it takes it, and that it is under its prefix (under /api/ errors are JSON).
    sample = re.sub(r"<[^>]*>", "1", template)
    try:
        match = resolve(sample, urlconf)
    except Resolver404:
        return None
    if (
        match.func is not view
        or match.url_name != name
        or not regex.match(sample)
        or not sample.startswith(prefix)
    ):
        return None
    return LeanRoute(name, regex, argument, converters[argument].to_python, seconds)


def _named_url(
    patterns: Sequence[URLPattern | URLResolver],
    name: str,
    template: str,
    regex: str,
    converters: dict[str, Any],
) -> tuple[URLPattern, str, str, dict[str, Any]] | None:
    """The first endpoint named ``name`` (in resolving order) with its route, its regex and
    its converters, joined along its includes. Only ``path()`` routes: a ``re_path()`` or an
    i18n prefix matches by rules of its own, so the URLs under it stay Django's."""
    for entry in patterns:
        if not isinstance(entry.pattern, RoutePattern):
            continue
        here = (
            template + str(entry.pattern),
            regex + entry.pattern.regex.pattern.removeprefix("^"),
            {**converters, **entry.pattern.converters},
        )
        if isinstance(entry, URLResolver):
            if not entry.default_kwargs and (found := _named_url(entry.url_patterns, name, *here)):
                return found
        elif entry.name == name:
            return entry, *here
    return None


def _forget_lean_routes(*, setting: str, **kwargs: object) -> None:
    if setting == "ROOT_URLCONF":
        lean_routes.cache_clear()


setting_changed.connect(_forget_lean_routes)
