"""The lean ASGI paths for the two requests a sale start is made of, ticket status and join,
and for the one a protected shop makes on each of its requests, the gate's check.

Django's ASGI handler costs far more per request than the work behind these two (see the
measured limits in docs/architecture.md), so they are answered here, in front of Django, by the
same functions the Django views call:

- ``GET /api/v1/tickets/{ticket}``: while the fan is in line in the hot index, the answer is
  one async Lua call plus the pure answer of ``queueing.line.answers.answer_from_index``. While
  Redis is away or the index is being rebuilt, a fan in a long line is answered here too:
  the entry's row read in a batch with the other polls' and the fan placed from the line's
  snapshot (``queueing.line.answers.ticket_poll_async``). Anything else (a bad ticket, an
  admitted fan, a lost index, a short line) goes to Django.
- ``POST /api/v1/events/{slug}/join``: each request becomes a Django request and is checked
  by ``api_fan.join_prepare``; the joins that arrive while one batch commits form the next
  batch (``api_fan.join_batch``, one transaction), committed in a thread of its own.
- ``GET /gate/{slug}/check``: answered here always (queueing/web/gate.py), from keys, tokens
  and session statuses held in-process for a bounded time.

Requests these paths are not sure about (a Host Django would refuse, plain HTTP where HTTPS
is required, a logged-in fan whose identity is their account) go to Django untouched.

Where they answer is the URLconf's business, not theirs (lean_routes.py); joins are
committed in batches by join_batcher.py; asgi_io.py reads and sends the raw ASGI messages. A
bug in them is still the API's JSON 500 with the security headers and a logged traceback,
never the server's plain-text page. The join queue is bounded (``WR_JOIN_QUEUE_MAX``) and has
a deadline (``WR_JOIN_QUEUE_DEADLINE_SECONDS``): past either, a join is told
``503 unavailable`` and is never committed.
"""

from __future__ import annotations

import functools
import io
import logging
import re
import time

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_vary_headers
from django.utils.functional import SimpleLazyObject

from queueing.line.answers import ticket_poll_async
from queueing.observability import untraced
from queueing.rules.ticket_codec import InvalidTicket, ticket_read
from queueing.web.api_errors import (
    api_exception_response,
    body_too_large,
    error_response,
    internal_error_response,
)
from queueing.web.api_fan import ticket_status_payload
from queueing.web.asgi_io import (
    SILENT,
    ASGIApp,
    Receive,
    Reply,
    Scope,
    Send,
    has_cookie,
    json_reply,
    read_body,
    reply,
    served_securely,
)
from queueing.web.edge_figures import REFUSED_STATUSES, refusal_counted
from queueing.web.gate import gate_lean
from queueing.web.join_batcher import JoinBatcher
from queueing.web.lean_routes import LeanRoute, lean_routes

logger = logging.getLogger(__name__)


class HotPaths:
    """ASGI app: the hot requests here, everything else (and every request these paths
    are not sure about) to ``inner``, the project's Django and Channels application."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner
        self.joins = JoinBatcher()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            for route in lean_routes().get(scope["method"], ()):
                if not (match := route.regex.match(scope["path"])):
                    continue
                started = time.perf_counter()
                with untraced():
                    reply = await self._lean(scope, receive, route, match)
                if reply is not None:
                    if reply is not SILENT:
                        await send(
                            {
                                "type": "http.response.start",
                                "status": reply.status,
                                "headers": reply.headers,
                            }
                        )
                        await send({"type": "http.response.body", "body": reply.body})
                        route.seconds.observe(time.perf_counter() - started)
                        if reply.status in REFUSED_STATUSES:
                            refusal_counted(reply.status, reply.body, "application/json")
                    return
                break
        await self.inner(scope, receive, send)

    async def _lean(
        self, scope: Scope, receive: Receive, route: LeanRoute, match: re.Match[str]
    ) -> Reply | None:
        """The lean answer; None: leave the request to Django.

        Whatever these paths do not map themselves (a bug, a library's surprise) is the API's
        JSON 500, as ApiErrorMiddleware answers it for Django's views: the server would
        otherwise send its own plain-text 500 without the security headers."""
        try:
            argument = route.to_python(match[route.argument])
        except ValueError:
            return None  # the converter refuses it: Django's resolver would not match it either
        secure: bool | None = False  # for the 500's headers, should even that question fail
        try:
            secure = served_securely(scope)
            if secure is None:
                return None
            if route.name == "gate-check":
                return await gate_lean(scope, argument, secure=secure)
            if scope["method"] == "GET":
                return await self._status(argument, secure=secure)
            return await self._join(scope, receive, argument, secure=secure)
        except Exception:  # the catch-all: JSON and a traceback, never plain text
            logger.exception("unhandled error on the lean path %s %s", route.name, scope["path"])
            return reply(internal_error_response(), secure=bool(secure))

    async def _status(self, ticket: str, *, secure: bool) -> Reply | None:
        """Answer a fan in line (from the hot index, or degraded); None: leave it to
        Django."""
        try:
            ref = ticket_read(ticket)
        except InvalidTicket:
            return None
        view = await ticket_poll_async(ref, ticket)
        if view is None:
            return None
        return json_reply(
            200,
            ticket_status_payload(view),
            secure=secure,
            extra=(
                (b"x-poll-after-seconds", f"{view.poll_after_seconds:g}".encode()),
                (b"cache-control", b"no-store"),
            ),
        )

    async def _join(
        self, scope: Scope, receive: Receive, slug: str, *, secure: bool
    ) -> Reply | None:
        if has_cookie(scope, settings.SESSION_COOKIE_NAME.encode()):
            return None  # a logged-in fan joins as their account: Django knows who that is
        body = await read_body(receive, limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        if body is None:
            return SILENT  # the client went away
        request = ASGIRequest(scope, io.BytesIO(body))
        request.user = SimpleLazyObject(functools.partial(_anonymous_fan, request))
        if len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            response: HttpResponse = error_response(body_too_large())
        else:
            try:
                response = await self.joins.submit(request, slug)
            except Exception as exc:  # noqa: BLE001  (the batch thread itself failed)
                response = api_exception_response(request, exc)
        if request.__dict__.get(_ASKED_WHO):
            patch_vary_headers(response, ("Cookie",))
        return reply(response, secure=secure)


_ASKED_WHO = "_lean_asked_who"


def _anonymous_fan(request: HttpRequest) -> AnonymousUser:
    """``request.user`` of a lean join: a fan without a session cookie, as Django's
    AuthenticationMiddleware finds them. Asking it reads the session there, for which the
    SessionMiddleware answers ``Vary: Cookie``; the lean answer does the same."""
    request.__dict__[_ASKED_WHO] = True
    return AnonymousUser()
