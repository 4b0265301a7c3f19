"""The Django gate's traffic rules and its policy while the room cannot be reached
(integrations/django_gate/waitingroom_gate: traffic_rules, client_address, rules_source,
room_outage, the middleware), without the room: a local HTTP server stands in for it, serving
the JWKS and the rules as the test says, and stops answering when the test stops it.

The conformance tests run generated rule lists and requests through the room's evaluator
(events/traffic_rules.py) and the gate's own reading of the canonical form, and require the
same decisions; the client's address likewise against the room's trusted-proxy rule."""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import RequestFactory
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from jwt.algorithms import OKPAlgorithm
from waitingroom_gate import stats
from waitingroom_gate.client_address import client_address
from waitingroom_gate.config import gate_config
from waitingroom_gate.middleware import WaitingRoomGateMiddleware
from waitingroom_gate.room_outage import RoomOutage
from waitingroom_gate.rules_source import TrafficRulesSource
from waitingroom_gate.traffic_rules import (
    RulesUnreadable,
    traffic_action,
    traffic_rules_compile,
)

from events.traffic_rules import (
    TrafficRequest,
    parse_traffic_rules,
    traffic_decision,
    traffic_rules_json,
)
from queueing.web.callers import client_ip_from
from tests.traffic_rule_cases import raw_rules, traffic_request, traffic_requests

EVENT = "spring-tour"
KEY = "integration-key-0123456789"

# ------------------------------------------------------------ conformance with the room


def gate_decision(canonical: list[dict[str, object]], req: TrafficRequest) -> tuple[str, Any]:
    # Through JSON, as the gate receives the rules.
    rules = traffic_rules_compile(json.loads(json.dumps(canonical)))
    return traffic_action(
        rules,
        address=req.address,
        path=req.path,
        headers=req.headers,
        cookies=req.cookies,
        user_agent=req.user_agent,
    )


def room_decision(canonical: list[dict[str, object]], req: TrafficRequest) -> tuple[str, Any]:
    decision = traffic_decision(parse_traffic_rules(canonical), req)
    return decision.action.value, decision.rule


@hypothesis_settings(max_examples=300, deadline=None)
@given(raw=raw_rules, reqs=st.lists(traffic_requests, min_size=1, max_size=8))
def test_the_gate_decides_as_the_room_on_generated_rules(raw: list[dict], reqs: list) -> None:
    canonical = traffic_rules_json(parse_traffic_rules(raw))
    for req in reqs:
        assert gate_decision(canonical, req) == room_decision(canonical, req), (canonical, req)


# Globs the generated world leaves out: sets, characters that mean something in a regex,
# case; and the addresses at a network's edges.
EDGE_RULES = [
    {"action": "block", "path": ["/c/[ab]", "/x/a.b+(c)", "/n/[!0-9]*"]},
    {"action": "bypass", "user_agent": ["*GoogleBot*", "Monitor/?.*"]},
    {"action": "block", "ip": ["2001:db8:77::/48", "192.0.2.0/25", "::ffff:198.51.100.0/120"]},
    {"action": "queue", "cookie": {"Session": "x"}, "header": {"X-Key": "v"}},
    {"action": "bypass", "path": ["/*"], "header": {"x-partner": "k"}},
]
EDGE_REQUESTS = [
    traffic_request(path=path)
    for path in ["/c/a", "/c/c", "/x/a.b+(c)", "/x/aXb+(c)", "/n/x1", "/n/1x", "/C/a"]
] + [
    traffic_request(user_agent=agent)
    for agent in ["x googlebot y", "MONITOR/2.0", "monitor/10.0", ""]
] + [
    traffic_request(address=address)
    for address in ["2001:db8:77::", "2001:db8:77:ffff:ffff:ffff:ffff:ffff", "2001:db8:78::",
                    "192.0.2.127", "192.0.2.128", "198.51.100.255", "::ffff:198.51.100.7",
                    "::ffff:192.0.2.1", None]
] + [
    traffic_request(headers={"x-key": "v"}, cookies={"Session": "x"}),
    traffic_request(headers={"x-key": "v"}, cookies={"session": "x"}),
    traffic_request(headers={"x-partner": "k"}, path="/anything"),
    traffic_request(headers={"x-partner": "K"}, path="/anything"),
]  # fmt: skip


def test_the_gate_decides_as_the_room_on_sets_specials_case_and_edges() -> None:
    canonical = traffic_rules_json(parse_traffic_rules(EDGE_RULES))
    decisions = [gate_decision(canonical, req) for req in EDGE_REQUESTS]
    assert decisions == [room_decision(canonical, req) for req in EDGE_REQUESTS]
    # Not all the same: the cases say something.
    assert {action for action, _ in decisions} == {"bypass", "queue", "block"}
    assert gate_decision(canonical, traffic_request(path="/c/a")) == ("block", 0)
    assert gate_decision(canonical, traffic_request(address="::ffff:198.51.100.7")) == (
        "block",
        2,
    )


@pytest.mark.parametrize(
    "raw",
    [
        {"action": "block"},
        [{"action": "open", "path": ["/"]}],
        [{"action": "block"}],
        [{"action": "block", "path": "/"}],
        [{"action": "block", "path": []}],
        [{"action": "block", "ip": ["not an address"]}],
        [{"action": "block", "header": {"x": 1}}],
        [{"action": "block", "colour": ["red"]}],
        ["block"],
    ],
)
def test_an_answer_that_is_not_a_rule_list_is_unreadable(raw: object) -> None:
    with pytest.raises(RulesUnreadable):
        traffic_rules_compile(raw)


@pytest.mark.parametrize("hops", [0, 1, 2])
@pytest.mark.parametrize(
    "forwarded",
    [None, "", "2001:db8:77::5", "203.0.113.9, 2001:db8:77::5", "2001:db8:77::5, 203.0.113.9",
     "garbage", "2001:db8::1, ", " , 10.0.0.1", "fe80::1%eth0", "[2001:db8::1]",
     "10.0.0.1:443", "::ffff:10.1.2.3"],
)  # fmt: skip
def test_the_client_address_is_read_as_the_room_reads_it(
    settings: Any, hops: int, forwarded: str | None
) -> None:
    settings.WR_TRUSTED_PROXY_COUNT = hops
    for remote in ("127.0.0.1", "::1"):
        room = client_ip_from(remote, forwarded)
        found = client_address(remote, forwarded, hops)
        assert found == ipaddress.ip_address(room), (remote, forwarded, hops)


def test_behind_one_proxy_only_the_address_it_wrote_counts() -> None:
    assert client_address("10.9.9.9", "2001:db8:77::5", 1) == ipaddress.ip_address("2001:db8:77::5")
    # The client wrote the first entry; the proxy appended the address it saw.
    spoofed = client_address("10.9.9.9", "2001:db8:77::5, 198.51.100.7", 1)
    assert spoofed == ipaddress.ip_address("198.51.100.7")
    assert client_address("10.9.9.9", "2001:db8:77::5", 0) == ipaddress.ip_address("10.9.9.9")
    assert client_address("unix:/run/shop.sock", None, 0) is None


# ------------------------------------------------------------- a room that the test drives


class Room:
    """What the stand-in room answers; it counts requests and can stop answering."""

    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        self.rules: list[dict[str, object]] = []
        self.rules_status = 200
        self.jwks_hits = 0
        self.rules_hits = 0
        self.not_modified = 0
        self.authorizations: list[str] = []
        self.server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        room = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: bytes, **headers: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/.well-known/jwks.json":
                    room.jwks_hits += 1
                    jwk = OKPAlgorithm.to_jwk(room.key.public_key(), as_dict=True)
                    body = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "EdDSA"}]}
                    return self._answer(200, json.dumps(body).encode())
                if self.path == f"/api/v1/events/{EVENT}/traffic-rules":
                    room.rules_hits += 1
                    room.authorizations.append(self.headers.get("Authorization", ""))
                    if room.rules_status != 200:
                        return self._answer(room.rules_status, b'{"error": "x", "detail": ""}')
                    version = str(abs(hash(json.dumps(room.rules))))
                    if self.headers.get("If-None-Match") == f'"{version}"':
                        room.not_modified += 1
                        return self._answer(304, b"", ETag=f'"{version}"')
                    body = {"traffic_rules": room.rules, "version": version}
                    return self._answer(200, json.dumps(body).encode(), ETag=f'"{version}"')
                return self._answer(404, b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def signed_pass(self) -> str:
        now = int(time.time())
        claims = {"iss": self.base, "aud": EVENT, "sub": "ticket-1", "iat": now, "nbf": now,
                  "exp": now + 600, "tier": "General", "jti": "j"}  # fmt: skip
        return jwt.encode(claims, self.key, algorithm="EdDSA", headers={"kid": "k1"})


@pytest.fixture
def room() -> Iterator[Room]:
    stand_in = Room()
    stand_in.start()
    try:
        yield stand_in
    finally:
        stand_in.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------- fetching the rules


def source_for(room: Room, clock: Clock, **options: Any) -> TrafficRulesSource:
    return TrafficRulesSource(
        f"{room.base}/api/v1/events/{EVENT}/traffic-rules",
        integration_key=KEY,
        clock=clock,
        **{"ttl": 10.0, "timeout": 2.0, **options},
    )


def test_rules_are_fetched_with_the_key_and_refetched_once_per_ttl(room: Room) -> None:
    room.rules = [{"action": "block", "path": ["/x"]}]
    clock = Clock()
    source = source_for(room, clock)
    for _ in range(20):
        assert len(source.rules()) == 1
    assert room.rules_hits == 1 and room.authorizations == [f"Bearer {KEY}"]
    clock.now += 9.9
    source.rules()
    assert room.rules_hits == 1
    clock.now += 0.1
    source.rules()
    assert (room.rules_hits, room.not_modified) == (2, 1)  # unchanged: a 304, no body
    room.rules = [{"action": "bypass", "path": ["/y"]}, {"action": "block", "path": ["/x"]}]
    clock.now += 10
    assert len(source.rules()) == 2 and room.rules_hits == 3


def test_the_last_good_rules_stay_while_the_room_cannot_give_them(room: Room) -> None:
    room.rules = [{"action": "block", "path": ["/x"]}]
    clock = Clock()
    source = source_for(room, clock)
    assert len(source.rules()) == 1
    before = stats()["rules_fetch_failures"]
    for status in (503, 401, 500):
        room.rules_status = status
        clock.now += 10
        assert len(source.rules()) == 1
    room.rules_status = 200
    room.rules = [{"action": "block"}]  # not a rule list the gate can apply
    room.not_modified = 0
    clock.now += 10
    assert len(source.rules()) == 1
    room.stop()
    clock.now += 10
    assert len(source.rules()) == 1
    assert stats()["rules_fetch_failures"] == before + 5


def test_never_fetched_means_no_rules_and_a_retry_per_ttl() -> None:
    clock = Clock()
    source = TrafficRulesSource(
        "http://127.0.0.1:9/rules", integration_key=KEY, ttl=10, timeout=1, clock=clock
    )
    assert source.rules() == () and source.fetches == 1
    assert source.rules() == () and source.fetches == 1
    clock.now += 10
    assert source.rules() == () and source.fetches == 2


# ----------------------------------------------------------------- the middleware, rules


def shop_view(request: HttpRequest) -> HttpResponse:
    admitted = request.waiting_room_pass
    return JsonResponse(
        {
            "ticket": admitted.ticket_id if admitted else None,
            "unchecked": request.waiting_room_unchecked,
        }
    )


def gate_for(room: Room, django_settings: Any, **changes: Any) -> WaitingRoomGateMiddleware:
    django_settings.WAITING_ROOM = {
        "URL": room.base,
        "EVENT": EVENT,
        "EXEMPT_PATHS": ["/static/"],
        "COOKIE_NAME": "pass",
        "INTEGRATION_KEY": KEY,
        "RULES_CACHE_SECONDS": 60,
        **changes,
    }
    return WaitingRoomGateMiddleware(shop_view)


RULES = [
    {"action": "bypass", "path": ["/monitor/*"]},
    {"action": "bypass", "header": {"x-partner-key": "s3cret"}},
    {"action": "block", "user_agent": ["*badbot*"]},
    {"action": "block", "ip": ["2001:db8:77::/48"]},
    {"action": "queue", "path": ["/static/*"]},
    {"action": "block", "path": ["/static/*"]},
]


def test_bypass_reaches_the_view_without_a_pass_and_block_is_a_403(room, settings) -> None:
    room.rules = RULES
    gate = gate_for(room, settings, TRUSTED_PROXY_COUNT=1)
    factory = RequestFactory()
    before = stats()

    response = gate(factory.get("/monitor/health"))
    assert response.status_code == 200
    assert json.loads(response.content) == {"ticket": None, "unchecked": False}
    assert gate(factory.get("/cart", HTTP_X_PARTNER_KEY="s3cret")).status_code == 200
    assert gate(factory.get("/cart", HTTP_X_PARTNER_KEY="S3cret")).status_code == 302

    blocked = gate(factory.get("/cart", HTTP_USER_AGENT="Mozilla/5.0 (BadBot 1.0)"))
    assert blocked.status_code == 403
    assert blocked["Content-Type"].startswith("text/html")
    assert b"blocked" in blocked.content and "no-store" in blocked["Cache-Control"]
    posted = gate(factory.post("/cart", HTTP_USER_AGENT="badbot"))
    assert posted.status_code == 403
    assert json.loads(posted.content)["error"] == "traffic_blocked"

    # Behind one trusted proxy: the address it wrote, not one the client wrote before it.
    assert gate(factory.get("/p", HTTP_X_FORWARDED_FOR="2001:db8:77::5")).status_code == 403
    spoofed = factory.get("/p", HTTP_X_FORWARDED_FOR="2001:db8:77::5, 198.51.100.7")
    assert gate(spoofed).status_code == 302
    # Exempt paths stay exempt, whatever a rule says of them.
    assert gate(factory.get("/static/app.css")).status_code == 200

    after = stats()
    assert after["traffic_bypass"] - before["traffic_bypass"] == 2
    assert after["traffic_block"] - before["traffic_block"] == 3
    assert room.rules_hits == 1  # within RULES_CACHE_SECONDS, one fetch for all of them


def test_a_pass_still_gets_in_where_no_rule_matches(room, settings) -> None:
    room.rules = RULES
    gate = gate_for(room, settings)
    request = RequestFactory().get("/cart")
    request.COOKIES["pass"] = room.signed_pass()
    response = gate(request)
    assert response.status_code == 200
    assert json.loads(response.content)["ticket"] == "ticket-1"


def test_without_an_integration_key_no_rules_are_fetched(room, settings) -> None:
    room.rules = RULES
    gate = gate_for(room, settings, INTEGRATION_KEY=None)
    assert gate.rules is None
    assert gate(RequestFactory().get("/monitor/health")).status_code == 302
    assert room.rules_hits == 0


@pytest.mark.parametrize(
    "changes",
    [
        {"INTEGRATION_KEY": ""},
        {"INTEGRATION_KEY": "a key"},
        {"INTEGRATION_KEY": 12},
        {"RULES_CACHE_SECONDS": 0},
        {"RULES_CACHE_SECONDS": "10"},
        {"TRUSTED_PROXY_COUNT": -1},
        {"TRUSTED_PROXY_COUNT": 1.0},
        {"TRUSTED_PROXY_COUNT": True},
        {"FAIL_OPEN_MINUTES": -1},
        {"FAIL_OPEN_MINUTES": "5"},
    ],
)
def test_bad_new_settings_fail_at_start_up(changes: dict[str, object]) -> None:
    with pytest.raises(ImproperlyConfigured):
        gate_config({"URL": "https://room.example", "EVENT": EVENT, **changes})


def test_new_settings_defaults() -> None:
    config = gate_config({"URL": "https://room.example", "EVENT": "tour 26"})
    assert config.integration_key is None
    assert (config.rules_cache_seconds, config.trusted_proxy_count) == (10, 0)
    assert config.fail_open_minutes == 0
    assert config.rules_url == "https://room.example/api/v1/events/tour%2026/traffic-rules"


# ------------------------------------------------------- the room cannot be reached


def test_an_outage_fails_open_for_its_window_then_closed_until_the_room_answers() -> None:
    clock = Clock()
    outage = RoomOutage("no keys", fail_open_seconds=60, clock=clock)
    before = stats()
    assert outage.let_through()  # the first failed request opens the window
    clock.now += 59.9
    assert outage.let_through()
    clock.now += 0.1
    assert not outage.let_through()
    clock.now += 3600
    assert not outage.let_through()
    outage.answered()
    clock.now += 1
    assert outage.let_through()  # a new outage, a new window
    after = stats()
    assert after["room_unreachable_let_through"] - before["room_unreachable_let_through"] == 3
    assert after["room_unreachable_refused"] - before["room_unreachable_refused"] == 2
    closed = RoomOutage("no keys", fail_open_seconds=0, clock=clock)
    assert not closed.let_through()


def wait_for(check: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_fail_closed_is_the_busy_page_while_the_room_is_down(room, settings, caplog) -> None:
    room.rules = [{"action": "bypass", "path": ["/monitor/*"]}]
    gate = gate_for(
        room,
        settings,
        JWKS_CACHE_SECONDS=1,
        JWKS_STALE_SECONDS=0,
        JWKS_MIN_REFETCH_SECONDS=0,
        ROOM_TIMEOUT_SECONDS=1,
    )
    token = room.signed_pass()
    with_pass = RequestFactory().get("/p")
    with_pass.COOKIES["pass"] = token
    assert gate(with_pass).status_code == 200
    room.stop()
    caplog.set_level(logging.WARNING, logger="waitingroom_gate")
    busy = wait_for(lambda: (r := gate(with_pass)).status_code == 503 and r)  # keys expired
    assert busy["Retry-After"] == "5" and "no-store" in busy["Cache-Control"]
    assert busy["Content-Type"].startswith("text/html")
    assert (
        gate(RequestFactory().get("/p")).status_code == 503
    )  # no pass: not to a room that is down
    posted = gate(RequestFactory().post("/cart"))
    assert posted.status_code == 503 and json.loads(posted.content)["error"] == "unavailable"
    # The last good rules still apply: a bypass needs no room.
    assert gate(RequestFactory().get("/monitor/x")).status_code == 200
    assert "waiting room unreachable (no keys): failing closed" in caplog.text
    room.start()  # the same port
    assert wait_for(lambda: gate(with_pass).status_code == 200)
    assert "waiting room reachable again (no keys)" in caplog.text


def test_fail_open_lets_requests_through_unchecked_for_n_minutes_only(
    room, settings, caplog
) -> None:
    gate = gate_for(
        room,
        settings,
        JWKS_CACHE_SECONDS=1,
        JWKS_STALE_SECONDS=0,
        JWKS_MIN_REFETCH_SECONDS=0,
        ROOM_TIMEOUT_SECONDS=1,
        FAIL_OPEN_MINUTES=0.05,  # 3 s
    )
    assert gate(RequestFactory().get("/p")).status_code == 302
    room.stop()
    caplog.set_level(logging.WARNING, logger="waitingroom_gate")
    before = stats()
    sent = time.monotonic()
    first = wait_for(lambda: (r := gate(RequestFactory().get("/p"))).status_code == 200 and r)
    window_starts_by = time.monotonic()
    assert json.loads(first.content) == {"ticket": None, "unchecked": True}
    # Within 3 s of the first failed request: unchecked; from 3 s after it: the busy page.
    statuses = []
    while time.monotonic() < window_starts_by + 5:
        asked = time.monotonic()
        status = gate(RequestFactory().get("/p")).status_code
        statuses.append(status)
        if time.monotonic() < sent + 3:
            assert status == 200
        if asked > window_starts_by + 3:
            assert status == 503
        time.sleep(0.05)
    assert statuses[-1] == 503 and 200 in statuses
    let_through = stats()["room_unreachable_let_through"] - before["room_unreachable_let_through"]
    assert let_through == 1 + statuses.count(200)
    lines = [r for r in caplog.records if "request let through unchecked" in r.getMessage()]
    assert len(lines) == let_through
    assert "fail-open window is over" in caplog.text
    room.start()
    assert wait_for(lambda: gate(RequestFactory().get("/p")).status_code == 302)


@pytest.mark.parametrize("fail_open_minutes, status", [(0, 503), (1, 200)])
def test_an_online_check_without_a_verdict_follows_the_policy(
    room, settings, fail_open_minutes, status
) -> None:
    """With ONLINE_CHECK_FAIL_OPEN off, a pass the room cannot confirm (its verify endpoint
    is missing here) is the room unreachable for that request."""
    gate = gate_for(
        room,
        settings,
        ONLINE_CHECK=True,
        ONLINE_CHECK_FAIL_OPEN=False,
        FAIL_OPEN_MINUTES=fail_open_minutes,
    )
    request = RequestFactory().get("/p")
    request.COOKIES["pass"] = room.signed_pass()
    assert gate(request).status_code == status
