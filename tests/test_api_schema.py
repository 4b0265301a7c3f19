"""The OpenAPI document, and schemathesis against the live server: no 5xx, no response that
breaks the documented schema, also with NUL and lone surrogates in its strings
(tests/schemathesis_hooks.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.urls.resolvers import RoutePattern

from tests.helpers import staff_token
from tests.processes import BIN, ROOT, running_stack

# Text PostgreSQL cannot store, in every string schemathesis sends.
HOOKS = Path(__file__).resolve().parent / "schemathesis_hooks.py"
SCHEMATHESIS_CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    ]
)


@pytest.mark.django_db
def test_the_schema_describes_every_part_of_the_api() -> None:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in [
        "/api/v1/events/{slug}/join",
        "/api/v1/events/{slug}",
        "/api/v1/events/{slug}/challenge",
        "/api/v1/tickets/{ticket}",
        "/api/v1/tickets/{ticket}/reenter",
        "/api/v1/passes/verify",
        "/api/v1/passes/complete",
        "/api/v1/events/{slug}/traffic-rules",
        "/.well-known/jwks.json",
        "/gate/{slug}/check",
        "/api/v1/manage/events/",
        "/api/v1/manage/events/{slug}/",
        "/api/v1/manage/events/{slug}/pause",
        "/api/v1/manage/events/{slug}/rotate-key",
        "/api/v1/manage/events/{slug}/admit-now",
        "/api/v1/audit/records/",
        "/api/v1/audit/events/{slug}/verify",
        "/api/v1/audit/events/{slug}/report",
        "/metrics",
        "/healthz",
        "/readyz",
    ]:
        assert path in paths, path


# Where machines call the room: every route under these is in the document. The pages (the
# fans', the dashboard, the admin, Queue-it's redirects) are HTML, not API.
MACHINE_PREFIXES = ("api/", "gate/", ".well-known/", "healthz", "readyz", "metrics")
# The document itself, and the staff's browsable reference to it.
NOT_API = {"/api/schema/", "/api/v1/docs/"}


def _routes(patterns: list, prefix: str = "") -> list[str]:
    routes: list[str] = []
    for entry in patterns:
        if not isinstance(entry.pattern, RoutePattern):
            continue
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            routes += _routes(entry.url_patterns, route)
        else:
            routes.append(route)
    return routes


@pytest.mark.django_db
def test_every_route_machines_call_is_in_the_schema() -> None:
    paths = set(Client().get("/api/schema/", {"format": "json"}).json()["paths"])
    routes = {
        "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
        for route in _routes(get_resolver().url_patterns)
        if route.startswith(MACHINE_PREFIXES)
    }
    assert "/api/v1/events/{slug}/challenge" in routes
    assert routes - NOT_API - paths == set()


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_server_errors_and_no_schema_violations(
    make_event, tmp_path: Path
) -> None:
    make_event(slug="demo")
    # Every permission, so that the writes are exercised too (docs/api.md, "Staff API").
    token = staff_token("robot", superuser=True)
    with running_stack() as stack:
        base = stack.web(workers=2)
        # The generated cases with NUL and lone surrogates in their bodies' strings. The
        # stateful phase runs without them: schemathesis validates the cases it links again,
        # as UTF-8, which a lone surrogate is not.
        _schemathesis(base, token, "--phases", "examples,coverage,fuzzing", hooks=True)
        _schemathesis(base, token, "--phases", "stateful", hooks=False)


def _schemathesis(base: str, token: str, *options: str, hooks: bool) -> None:
    result = subprocess.run(
        [
            str(BIN / "schemathesis"),
            "run",
            f"{base}/api/schema/?format=json",
            "--url",
            base,
            "--checks",
            SCHEMATHESIS_CHECKS,
            "--header",
            f"Authorization: Token {token}",
            "--mode",
            "positive",
            "--max-examples",
            "25",
            "--generation-deterministic",
            "--request-timeout",
            "20",
            "--workers",
            "2",
            *options,
        ],
        cwd=ROOT,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)} if hooks else None,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    sys.stdout.write(output[-1500:])
