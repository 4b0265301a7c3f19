"""The gate: every request to a protected path needs a valid pass from the waiting room.

- A pass in the ``wr_pass`` query parameter (the room sends admitted fans back that way) is
  moved into a cookie, and a GET or HEAD is redirected to the same URL without it, so the
  pass does not stay in the address bar, the history or the shop's access logs.
- A valid pass in the cookie lets the request through, with the claims on
  ``request.waiting_room_pass``.
- Anyone else goes to the room: GET and HEAD get a 302 to ``<room>/e/<event>/?return=<URL>``;
  other methods get 403 with a JSON body naming the same URL (a redirect would drop the
  request's body, and scripts cannot follow it to a waiting page anyway). An invalid or
  expired cookie is deleted on the way.

Before any of it, the on-sale's traffic rules (with ``INTEGRATION_KEY``) may let the request
straight through (``bypass``) or refuse it (``block``, 403). And while the room cannot be
reached (room_outage.py), requests that cannot be checked get the busy page (503), or within
``FAIL_OPEN_MINUTES`` go through unchecked, counted and logged.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils.cache import add_never_cache_headers, patch_vary_headers

from waitingroom_gate.client_address import client_address
from waitingroom_gate.config import GateConfig, gate_config
from waitingroom_gate.gate_stats import count
from waitingroom_gate.jwks import JwksCache
from waitingroom_gate.online import OnlineChecker, RoomUnreachable
from waitingroom_gate.pages import SAFE_METHODS, blocked_response, busy_response
from waitingroom_gate.passes import PassRejected, WaitingRoomPass, pass_verify
from waitingroom_gate.room_outage import RoomOutage
from waitingroom_gate.rules_source import TrafficRulesSource
from waitingroom_gate.traffic_rules import BLOCK, BYPASS, QUEUE, traffic_action
from waitingroom_gate.urls import PASS_PARAMETER, room_entry_url, url_without_pass

logger = logging.getLogger("waitingroom_gate")

# The header the room's own nginx gate uses for the same URL (GET /gate/{slug}/check).
LOCATION_HEADER = "X-Waiting-Room-Location"


class _OnlineCheckUnanswered(Exception):
    """The online check got no verdict, and ONLINE_CHECK_FAIL_OPEN is off: the room counts
    as unreachable for this request."""


class WaitingRoomGateMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.config: GateConfig = gate_config(getattr(settings, "WAITING_ROOM", None))
        # One cache per process, shared by its threads (the cache has its own lock).
        self.keys = JwksCache(
            self.config.jwks_url,
            ttl=self.config.jwks_cache_seconds,
            min_refetch=self.config.jwks_min_refetch_seconds,
            stale_for=self.config.jwks_stale_seconds,
            timeout=self.config.room_timeout_seconds,
        )
        fail_open_seconds = self.config.fail_open_minutes * 60
        self.keys_outage = RoomOutage("no keys", fail_open_seconds=fail_open_seconds)
        self.online_outage = RoomOutage("online check", fail_open_seconds=fail_open_seconds)
        self.online = (
            OnlineChecker(
                self.config.verify_url,
                event=self.config.event,
                ttl=self.config.online_check_cache_seconds,
                timeout=self.config.room_timeout_seconds,
                answered=self.online_outage.answered,
            )
            if self.config.online_check
            else None
        )
        self.rules = (
            TrafficRulesSource(
                self.config.rules_url,
                integration_key=self.config.integration_key,
                ttl=self.config.rules_cache_seconds,
                timeout=self.config.room_timeout_seconds,
            )
            if self.config.integration_key
            else None
        )
        # When to try again: the gate asks the room for keys no sooner than this.
        self.retry_after = max(5, math.ceil(self.config.jwks_min_refetch_seconds))

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.waiting_room_pass = None  # type: ignore[attr-defined]
        request.waiting_room_unchecked = False  # type: ignore[attr-defined]
        if request.path_info.startswith(self.config.exempt_paths):
            return self.get_response(request)
        if self.rules is not None:
            action = self._traffic_action(request)
            if action == BYPASS:
                count("traffic_bypass")
                return self.get_response(request)
            if action == BLOCK:
                count("traffic_block")
                return blocked_response(request)
        if not self.keys.usable():
            return self._room_unreachable(request, self.keys_outage)
        self.keys_outage.answered()
        try:
            return self._gate(request)
        except _OnlineCheckUnanswered:
            return self._room_unreachable(request, self.online_outage)

    def _traffic_action(self, request: HttpRequest) -> str:
        assert self.rules is not None
        rules = self.rules.rules()
        if not rules:
            return QUEUE
        action, index = traffic_action(
            rules,
            address=client_address(
                request.META.get("REMOTE_ADDR", ""),
                request.headers.get("X-Forwarded-For"),
                self.config.trusted_proxy_count,
            ),
            path=request.path,
            headers={name.lower(): value for name, value in request.headers.items()},
            cookies=request.COOKIES,
            user_agent=request.headers.get("User-Agent", ""),
        )
        if action == BLOCK:
            logger.info("waiting room traffic rule %d blocked %s", index, request.path)
        return action

    def _room_unreachable(self, request: HttpRequest, outage: RoomOutage) -> HttpResponse:
        if outage.let_through():
            request.waiting_room_unchecked = True  # type: ignore[attr-defined]
            return self.get_response(request)
        return busy_response(request, self.retry_after)

    def _gate(self, request: HttpRequest) -> HttpResponse:
        from_query = request.GET.get(PASS_PARAMETER)
        if from_query is not None:
            admitted = self._admitted(from_query)
            if admitted is not None:
                return self._take_pass_from_query(request, admitted)
        from_cookie = request.COOKIES.get(self.config.cookie_name)
        if from_cookie:
            admitted = self._admitted(from_cookie)
            if admitted is not None:
                if from_query is not None and request.method in SAFE_METHODS:
                    # A stale link's bad pass, while the cookie's is good: just tidy the URL.
                    return self._redirect_to_clean_url(request)
                return self._let_in(request, admitted)
        return self._send_to_room(request, clear_cookie=from_cookie is not None)

    def _admitted(self, token: str) -> WaitingRoomPass | None:
        try:
            admitted = pass_verify(
                token,
                keys=self.keys.key,
                issuer=self.config.room_url,
                event=self.config.event,
                now=time.time(),
                leeway=self.config.leeway_seconds,
            )
        except PassRejected as rejected:
            logger.info("waiting room pass refused: %s", rejected.reason)
            return None
        if self.online is None:
            return admitted
        try:
            verdict = self.online.verdict(token)
        except RoomUnreachable as error:
            logger.warning("waiting room cannot confirm a pass: %s", error)
            if not self.config.online_check_fail_open:
                raise _OnlineCheckUnanswered() from error
            count("online_check_unconfirmed")
            return admitted
        if not verdict.valid:
            logger.info("waiting room pass refused by the room: %s", verdict.reason)
            return None
        return admitted

    def _let_in(self, request: HttpRequest, admitted: WaitingRoomPass) -> HttpResponse:
        request.waiting_room_pass = admitted  # type: ignore[attr-defined]
        response = self.get_response(request)
        # What a fan with a pass sees must not be served from a shared cache to one without.
        patch_vary_headers(response, ("Cookie",))
        return response

    def _take_pass_from_query(
        self, request: HttpRequest, admitted: WaitingRoomPass
    ) -> HttpResponse:
        if request.method in SAFE_METHODS:
            response = self._redirect_to_clean_url(request)
        else:
            response = self._let_in(request, admitted)
        self._set_cookie(request, response, admitted)
        return response

    def _redirect_to_clean_url(self, request: HttpRequest) -> HttpResponse:
        # Absolute, from build_absolute_uri: a path such as "//elsewhere.example/" must not
        # become a scheme-relative Location that leaves the shop.
        response = HttpResponseRedirect(url_without_pass(request.build_absolute_uri()))
        add_never_cache_headers(response)
        return response

    def _set_cookie(
        self, request: HttpRequest, response: HttpResponse, admitted: WaitingRoomPass
    ) -> None:
        lifetime = int(admitted.expires_at.timestamp() - time.time())
        response.set_cookie(
            self.config.cookie_name,
            admitted.token,
            max_age=max(1, lifetime),
            path="/",
            domain=self.config.cookie_domain,
            secure=request.is_secure(),
            httponly=True,
            samesite="Lax",
        )

    def _send_to_room(self, request: HttpRequest, *, clear_cookie: bool) -> HttpResponse:
        room = room_entry_url(
            room_url=self.config.room_url,
            event=self.config.event,
            return_url=url_without_pass(request.build_absolute_uri()),
        )
        response: HttpResponse
        if request.method in SAFE_METHODS:
            response = HttpResponseRedirect(room)
        else:
            response = JsonResponse(
                {
                    "error": "pass_required",
                    "detail": "This site is behind a waiting room; join it to get a pass.",
                    "waiting_room_url": room,
                },
                status=403,
            )
        response[LOCATION_HEADER] = room
        add_never_cache_headers(response)
        if clear_cookie:
            response.delete_cookie(
                self.config.cookie_name, path="/", domain=self.config.cookie_domain, samesite="Lax"
            )
        return response
