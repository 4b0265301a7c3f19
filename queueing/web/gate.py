"""``GET /gate/{slug}/check``: a web server in front of a shop asks, for every request, whether
the fan may in (nginx ``auth_request``; docs/api.md "Protected sites", docs/gate-nginx.md).

204 when the request carries a valid, unexpired pass of this on-sale whose session is still
on and is the entry's current one, not one that ended before a re-entry (the gate's cookie
on the shop's host, or ``wr_pass`` in the original URL); 401 with where the room is
otherwise. The lean ASGI path answers it (queueing/web/hot_paths.py) without PostgreSQL on
most requests: the keys and verified tokens are held in-process
(queueing/passes/cached.py), and a session's state is read at most once per
``WR_GATE_STATE_SECONDS`` per process (queueing/line/sessions.py). The Django view
below gives the same answers where the lean path is not mounted (a WSGI server, the test
client); it reads the session's state every time.

Before any pass is looked at, the on-sale's traffic rules judge the original request
(events/traffic_rules.py; held per process for at most ``WR_TRAFFIC_RULES_SECONDS``:
queueing/line/gate_rules.py): ``bypass`` is a 204 at once (no pass, no cookie, nothing
written), ``block`` a 403 ``traffic_blocked``, ``queue`` (and no rule matching) the pass check
above. Each decision for an on-sale that exists is counted in
``waitingroom_traffic_decisions_total{event,action}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse

from events.traffic_rules import Address, TrafficAction, traffic_decision
from queueing.line.gate_rules import GateRules, gate_rules, gate_rules_async
from queueing.line.sessions import session_state, sessions_read
from queueing.passes.cached import pass_claims, pass_claims_async
from queueing.passes.signing import PassClaims, PassInvalid
from queueing.rules.gate import (
    BLOCKED_BODY,
    CLIENT_ADDRESS_HEADER,
    REFUSED_BODY,
    GateAnswer,
    OriginalRequest,
    client_address_read,
    cookie_passes,
    gate_admit,
    gate_bypass,
    gate_refuse,
    original_request_read,
    pass_candidates,
    traffic_request,
)
from queueing.web.api_errors import json_api, unavailable_response
from queueing.web.asgi_io import Reply, Scope, reply
from queueing.web.callers import client_ip, scope_client_ip
from queueing.web.latency import GATE_SECONDS, observed, traffic_decision_counted
from queueing.web.middleware import hot_path_headers


@dataclass(frozen=True, slots=True)
class GateQuestion:
    slug: str
    original: OriginalRequest
    cookies: list[str]  # the values of the gate's cookie for this on-sale


def _question(slug: str, headers: Iterable[tuple[str, str]]) -> GateQuestion:
    """The question from the request's headers (lower-case names, Latin-1 values)."""
    found: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        if name == "cookie":
            cookies.append(value)
        elif name in _READ:
            found.setdefault(name, value)
    return GateQuestion(
        slug=slug,
        original=original_request_read(
            uri=found.get("x-original-uri"),
            host=found.get("x-original-host") or found.get("x-forwarded-host"),
            proto=found.get("x-original-proto"),
        ),
        cookies=cookie_passes(cookies, slug),
    )


# What the web server passes about the original request (docs/gate-nginx.md).
_READ = frozenset({"x-original-uri", "x-original-host", "x-forwarded-host", "x-original-proto"})
_ADDRESS = CLIENT_ADDRESS_HEADER.lower()


def _traffic_action(
    slug: str,
    rules: GateRules,
    headers: Iterable[tuple[str, str]],
    room_address: Callable[[], str],
) -> TrafficAction:
    """What the on-sale's rules say of the request (``queue`` without rules), counted. The
    address is the one the web server names (``X-Original-Remote-Addr``); without that
    header, the client's address by the room's own trusted-proxy rule (callers.py)."""
    if not rules.exists:
        return TrafficAction.QUEUE  # nothing to count: the slug is anybody's to invent
    if not rules.rules:
        traffic_decision_counted(slug, TrafficAction.QUEUE)
        return TrafficAction.QUEUE
    joined: dict[str, str] = {}
    cookie_headers: list[str] = []
    for name, value in headers:
        if name == "cookie":
            cookie_headers.append(value)
        joined[name] = f"{joined[name]},{value}" if name in joined else value
    address: Address | None
    if _ADDRESS in joined:
        address = client_address_read(joined[_ADDRESS])
    else:
        address = client_address_read(room_address())
    request = traffic_request(headers=joined, cookie_headers=cookie_headers, address=address)
    decision = traffic_decision(rules.rules, request)
    traffic_decision_counted(slug, decision.action)
    return decision.action


def _scope_headers(scope: Scope) -> list[tuple[str, str]]:
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]


def _refused(question: GateQuestion) -> GateAnswer:
    return gate_refuse(
        original=question.original, slug=question.slug, public_url=settings.WR_PUBLIC_URL
    )


def _admit(
    question: GateQuestion, token: str, from_query: bool, claims: PassClaims, now: float
) -> GateAnswer:
    return gate_admit(
        original=question.original,
        slug=question.slug,
        token=token,
        from_query=from_query,
        expires_at=claims.expires_at.timestamp(),
        now=now,
    )


async def gate_answer_async(question: GateQuestion, *, now: float) -> GateAnswer:
    """The answer from the event loop; raises DatabaseError when PostgreSQL had to be read
    (keys, a session's state) and could not be."""
    for token, from_query in pass_candidates(question.original, question.cookies):
        try:
            claims = await pass_claims_async(token, now=now)
        except PassInvalid:
            continue
        if claims.event_slug != question.slug:
            continue  # another on-sale's pass: its session is not read
        session = await session_state((claims.event_slug, claims.ticket_id))
        if session is not None and session.lets_in(claims):
            return _admit(question, token, from_query, claims, now)
    return _refused(question)


def gate_answer(question: GateQuestion, *, now: float) -> GateAnswer:
    """``gate_answer_async`` for the Django view: the session's state is read each time."""
    for token, from_query in pass_candidates(question.original, question.cookies):
        try:
            claims = pass_claims(token, now=now)
        except PassInvalid:
            continue
        if claims.event_slug != question.slug:
            continue
        key = (claims.event_slug, claims.ticket_id)
        session = sessions_read([key])[key]
        if session is not None and session.lets_in(claims):
            return _admit(question, token, from_query, claims, now)
    return _refused(question)


_REFUSED_JSON = json.dumps(REFUSED_BODY).encode()
_BLOCKED_JSON = json.dumps(BLOCKED_BODY).encode()
# A bypass and a block depend on the request's cookies and headers: no cache may keep them.
_UNCACHED = gate_bypass().headers


def gate_response(answer: GateAnswer) -> HttpResponse:
    if answer.admitted:
        response = HttpResponse(status=204)
        del response["Content-Type"]  # no body
    else:
        response = JsonResponse(REFUSED_BODY, status=401)
    for name, value in answer.headers:
        # Set-Cookie too, as the header itself: the gate writes its own attributes.
        response[name] = value
    return response


def _blocked_response() -> HttpResponse:
    response = JsonResponse(BLOCKED_BODY, status=403)
    for name, value in _UNCACHED:
        response[name] = value
    return response


def gate_reply(answer: GateAnswer, *, secure: bool) -> Reply:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers
    ]
    if answer.admitted:
        return Reply(204, [*headers, *hot_path_headers(secure=secure)], b"")
    return _json_reply(401, headers, _REFUSED_JSON, secure=secure)


def _json_reply(
    status: int, headers: list[tuple[bytes, bytes]], body: bytes, *, secure: bool
) -> Reply:
    headers = [
        (b"content-type", b"application/json"),
        *headers,
        (b"content-length", str(len(body)).encode()),
        *hot_path_headers(secure=secure),
    ]
    return Reply(status, headers, body)


_UNCACHED_RAW = [(name.lower().encode(), value.encode()) for name, value in _UNCACHED]


async def gate_lean(scope: Scope, slug: str, *, secure: bool) -> Reply:
    """The lean path's answer (queueing/web/hot_paths.py)."""
    headers = _scope_headers(scope)
    try:
        rules = await gate_rules_async(slug)
        action = _traffic_action(slug, rules, headers, lambda: scope_client_ip(scope))
        if action is TrafficAction.BYPASS:
            return gate_reply(gate_bypass(), secure=secure)
        if action is TrafficAction.BLOCK:
            return _json_reply(403, list(_UNCACHED_RAW), _BLOCKED_JSON, secure=secure)
        answer = await gate_answer_async(_question(slug, headers), now=time.time())
    except DatabaseError:
        return reply(unavailable_response(), secure=secure)
    return gate_reply(answer, secure=secure)


@observed(GATE_SECONDS)
@json_api("GET")
def check(request: HttpRequest, slug: str) -> HttpResponse:
    headers = [(name.lower(), value) for name, value in request.headers.items()]
    try:
        action = _traffic_action(slug, gate_rules(slug), headers, lambda: client_ip(request))
        if action is TrafficAction.BYPASS:
            return gate_response(gate_bypass())
        if action is TrafficAction.BLOCK:
            return _blocked_response()
        answer = gate_answer(_question(slug, headers), now=time.time())
    except DatabaseError:
        return unavailable_response()
    return gate_response(answer)
