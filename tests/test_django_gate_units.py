"""The Django gate's parts (integrations/django_gate/waitingroom_gate) without the room: its
JWKS cache and online check against a local HTTP server whose answers the test controls, the
offline verification with keys made here, and the middleware with Django's RequestFactory."""

from __future__ import annotations

import ast
import json
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
from jwt.algorithms import OKPAlgorithm
from waitingroom_gate.config import gate_config
from waitingroom_gate.jwks import JwksCache, jwks_parse
from waitingroom_gate.middleware import WaitingRoomGateMiddleware
from waitingroom_gate.online import OnlineChecker, RoomUnreachable
from waitingroom_gate.passes import PassRejected, pass_verify
from waitingroom_gate.urls import query_without_pass, room_entry_url

from tests.processes import ROOT

EVENT = "spring-tour"


class Room:
    """What the fake room answers; ``hits`` counts JWKS requests."""

    def __init__(self) -> None:
        self.jwks_status = 200
        self.jwks_body = b'{"keys": []}'
        self.verify_status = 404
        self.verify_body = b""
        self.delay = 0.0
        self.hits = 0
        self.lock = threading.Lock()

    def publish(self, *keys: tuple[str, Ed25519PrivateKey]) -> None:
        self.jwks_status = 200
        self.jwks_body = json.dumps({"keys": [public_jwk(kid, key) for kid, key in keys]}).encode()


def public_jwk(kid: str, key: Ed25519PrivateKey) -> dict[str, Any]:
    jwk = OKPAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "use": "sig", "alg": "EdDSA"}


@pytest.fixture
def room() -> Iterator[tuple[Room, str]]:
    state = Room()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path != "/.well-known/jwks.json":
                return self._answer(404, b"{}")
            with state.lock:
                state.hits += 1
            time.sleep(state.delay)
            self._answer(state.jwks_status, state.jwks_body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._answer(state.verify_status, state.verify_body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cache_for(base: str, clock: Clock, **options: float) -> JwksCache:
    settings = {"ttl": 300.0, "min_refetch": 10.0, "stale_for": 3600.0, "timeout": 2.0}
    return JwksCache(f"{base}/.well-known/jwks.json", clock=clock, **{**settings, **options})


# The JWKS cache


def test_known_keys_come_from_the_cache_until_it_expires(room) -> None:
    state, base = room
    key = Ed25519PrivateKey.generate()
    state.publish(("k1", key))
    clock = Clock()
    cache = cache_for(base, clock)
    for _ in range(20):
        assert cache.key("k1") is not None
    assert state.hits == 1
    clock.now += 299
    assert cache.key("k1") is not None and state.hits == 1
    clock.now += 1
    assert cache.key("k1") is not None and state.hits == 2


def test_an_unknown_kid_refetches_once_and_finds_the_rotated_key(room) -> None:
    state, base = room
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    state.publish(("old", old))
    clock = Clock()
    cache = cache_for(base, clock)
    assert cache.key("old") is not None
    state.publish(("old", old), ("new", new))
    clock.now += 10  # the rate limit's interval, far inside the cache's lifetime
    found = cache.key("new")
    assert found is not None
    assert found.public_bytes_raw() == new.public_key().public_bytes_raw()
    assert state.hits == 2
    assert cache.key("old") is not None and cache.key("new") is not None
    assert state.hits == 2


def test_made_up_kids_cannot_make_the_shop_hammer_the_room(room) -> None:
    state, base = room
    state.publish(("k1", Ed25519PrivateKey.generate()))
    clock = Clock()
    cache = cache_for(base, clock)
    assert cache.key("k1") is not None
    # Within min_refetch (10 s) of the last fetch, unknown kids cost the room nothing.
    for attempt in range(200):
        clock.now += 0.01
        assert cache.key(f"forged-{attempt}") is None
    assert state.hits == 1
    # Then one refetch, and none for the next 10 s however many kids are made up.
    clock.now = 1010.0
    for attempt in range(200):
        assert cache.key(f"forged-later-{attempt}") is None
        clock.now += 0.04
    assert state.hits == 2
    clock.now = 1020.0
    assert cache.key("forged-again") is None and state.hits == 3
    assert cache.key("k1") is not None and state.hits == 3


def test_threads_asking_for_an_unknown_kid_at_once_fetch_it_once(room) -> None:
    state, base = room
    key = Ed25519PrivateKey.generate()
    state.publish(("k1", key))
    state.delay = 0.2
    cache = cache_for(base, Clock())
    found: list[object] = []
    threads = [threading.Thread(target=lambda: found.append(cache.key("k1"))) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert state.hits == 1
    assert len(found) == 16 and all(k is not None for k in found)


def test_known_keys_do_not_wait_for_a_slow_refetch(room) -> None:
    state, base = room
    state.publish(("k1", Ed25519PrivateKey.generate()))
    clock = Clock()
    cache = cache_for(base, clock)
    assert cache.key("k1") is not None
    clock.now += 300  # expired: the next lookup refetches, and the room is slow to answer
    state.delay = 1.0
    fetching = threading.Thread(target=cache.key, args=("k1",))
    fetching.start()
    wait_for = time.monotonic() + 2
    while state.hits < 2 and time.monotonic() < wait_for:
        time.sleep(0.01)
    assert state.hits == 2  # that fetch is under way
    started = time.monotonic()
    assert cache.key("k1") is not None
    assert time.monotonic() - started < 0.2
    fetching.join()
    assert state.hits == 2


def test_an_unreachable_room_leaves_the_last_good_keys_for_a_while(room) -> None:
    state, base = room
    state.publish(("k1", Ed25519PrivateKey.generate()))
    clock = Clock()
    cache = cache_for(base, clock, ttl=300, stale_for=3600)
    assert cache.key("k1") is not None
    state.jwks_status, state.jwks_body = 503, b'{"error": "unavailable"}'
    clock.now += 300
    assert cache.key("k1") is not None  # past its lifetime, the room down: kept
    assert state.hits == 2
    for _ in range(50):
        clock.now += 0.1
        assert cache.key("k1") is not None
    assert state.hits == 2  # retries are rate-limited too: no timeout on every request
    clock.now = 1000.0 + 300 + 3600 - 0.5
    assert cache.key("k1") is not None
    clock.now = 1000.0 + 300 + 3600
    assert cache.key("k1") is None  # past ttl + stale_for: fail closed
    state.publish(("k1", Ed25519PrivateKey.generate()))
    clock.now += 10
    assert cache.key("k1") is not None  # the room is back


def test_a_refused_connection_or_an_answer_that_is_not_a_jwks_keeps_the_keys(room) -> None:
    state, base = room
    state.publish(("k1", Ed25519PrivateKey.generate()))
    clock = Clock()
    cache = cache_for(base, clock)
    assert cache.key("k1") is not None
    for body in (b"<html>maintenance</html>", b'{"keys": "none"}', b"[]"):
        state.jwks_body = body
        clock.now += 300
        assert cache.key("k1") is not None
    closed = JwksCache("http://127.0.0.1:9/.well-known/jwks.json", timeout=1, clock=Clock())
    assert closed.key("k1") is None and closed.fetches == 1


def test_only_public_ed25519_signing_keys_are_taken_from_the_jwks() -> None:
    good = Ed25519PrivateKey.generate()
    private_jwk = OKPAlgorithm.to_jwk(good, as_dict=True)
    document = {
        "keys": [
            public_jwk("good", good),
            {**private_jwk, "kid": "private"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "rsa"},
            {**public_jwk("enc", good), "use": "enc"},
            {**public_jwk("hs", good), "alg": "HS256"},
            {**public_jwk("", good)},
            {"kty": "OKP", "crv": "Ed25519", "x": "!!", "kid": "broken"},
            "not a key",
        ]
    }
    assert set(jwks_parse(json.dumps(document).encode())) == {"good"}


# Offline verification

NOW = 1_800_000_000
ISSUER = "https://room.example"


def claims(**changes: Any) -> dict[str, Any]:
    base = {
        "iss": ISSUER,
        "aud": EVENT,
        "sub": "3f0d7c1e-0000-4000-8000-000000000001",
        "jti": "abc",
        "iat": NOW - 60,
        "nbf": NOW - 60,
        "exp": NOW + 600,
        "tier": "General",
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


ROOM_KEY = Ed25519PrivateKey.generate()


def signed(body: dict[str, Any], key: Ed25519PrivateKey = ROOM_KEY, kid: str = "room") -> str:
    return jwt.encode(body, key, algorithm="EdDSA", headers={"kid": kid})


def verify(token: str, now: float = NOW) -> Any:
    keys = {"room": ROOM_KEY.public_key()}
    return pass_verify(token, keys=keys.get, issuer=ISSUER, event=EVENT, now=now, leeway=5)


def reason(token: str, now: float = NOW) -> str:
    with pytest.raises(PassRejected) as rejected:
        verify(token, now)
    return rejected.value.reason


def test_a_pass_the_room_signed_for_this_event_is_accepted_with_its_claims() -> None:
    token = signed(claims())
    admitted = verify(token)
    assert admitted.token == token
    assert (admitted.event, admitted.tier, admitted.jti) == (EVENT, "General", "abc")
    assert admitted.ticket_id == "3f0d7c1e-0000-4000-8000-000000000001"
    assert admitted.expires_at.timestamp() == NOW + 600


def test_time_claims_are_checked_with_a_small_leeway() -> None:
    assert verify(signed(claims(exp=NOW - 4)))
    assert reason(signed(claims(exp=NOW - 5))) == "expired"
    assert verify(signed(claims(nbf=NOW + 5)))
    assert reason(signed(claims(nbf=NOW + 6))) == "not_yet_valid"


def test_passes_for_another_event_or_from_another_issuer_are_refused() -> None:
    assert reason(signed(claims(aud="other-show"))) == "wrong_event"
    assert reason(signed(claims(iss="https://room.example.evil"))) == "wrong_issuer"
    assert reason(signed(claims(iss=ISSUER + "/"))) == "wrong_issuer"


def test_a_pass_signed_with_another_key_is_refused_whatever_its_headers_say() -> None:
    forger = Ed25519PrivateKey.generate()
    assert reason(signed(claims(), forger)) == "bad_signature"
    assert reason(signed(claims(), forger, kid="forger")) == "unknown_key"
    # A key carried in the pass itself is never used.
    embedded = jwt.encode(
        claims(),
        forger,
        algorithm="EdDSA",
        headers={"kid": "forger", "jwk": public_jwk("forger", forger), "jku": "https://x.example"},
    )
    assert reason(embedded) == "unknown_key"
    no_kid = jwt.encode(claims(), ROOM_KEY, algorithm="EdDSA")
    assert reason(no_kid) == "unknown_key"


def test_other_algorithms_are_refused() -> None:
    unsigned = jwt.encode(claims(), None, algorithm="none", headers={"kid": "room"})
    assert reason(unsigned) == "bad_signature"
    public_bytes = ROOM_KEY.public_key().public_bytes_raw()
    hmac = jwt.encode(claims(), public_bytes, algorithm="HS256", headers={"kid": "room"})
    assert reason(hmac) == "bad_signature"


@pytest.mark.parametrize("missing", ["iss", "aud", "sub", "iat", "nbf", "exp"])
def test_a_pass_without_a_required_claim_is_malformed(missing: str) -> None:
    body = claims()
    del body[missing]
    assert reason(signed(body)) == "malformed"


@pytest.mark.parametrize("garbage", ["", "x", "a.b.c", "é.é.é", "a" * 5000])
def test_garbage_is_malformed(garbage: str) -> None:
    assert reason(garbage) == "malformed"


# URLs


def test_only_the_pass_leaves_the_query_the_rest_keeps_its_spelling() -> None:
    assert query_without_pass("a=1&wr_pass=x.y.z&b=%2F+c&&c") == "a=1&b=%2F+c&c"
    assert query_without_pass("wr%5Fpass=x&wr_pass&keep=wr_pass") == "keep=wr_pass"
    assert query_without_pass("") == ""


def test_the_room_url_carries_the_return_url_percent_encoded() -> None:
    url = room_entry_url(
        room_url="https://room.example", event="tour 2026", return_url="https://shop/a?b=1&c=2"
    )
    assert (
        url == "https://room.example/e/tour%202026/?return=https%3A%2F%2Fshop%2Fa%3Fb%3D1%26c%3D2"
    )


# Settings


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {"EVENT": EVENT},
        {"URL": "room.example", "EVENT": EVENT},
        {"URL": "https://room.example?x=1", "EVENT": EVENT},
        {"URL": "https://room.example"},
        {"URL": "https://room.example", "EVENT": EVENT, "EXEMPT_PATHS": "/static/"},
        {"URL": "https://room.example", "EVENT": EVENT, "EXEMPT_PATHS": ["static/"]},
        {"URL": "https://room.example", "EVENT": EVENT, "JWKS_CACHE_SECONDS": "300"},
        {"URL": "https://room.example", "EVENT": EVENT, "ONLINE_CHECK": "yes"},
        {"URL": "https://room.example", "EVENT": EVENT, "COOKIE_NAME": "a;b"},
        {"URL": "https://room.example", "EVENT": EVENT, "EXEMPT_PATH": ["/static/"]},
    ],
)
def test_bad_settings_fail_at_start_up(raw: object) -> None:
    with pytest.raises(ImproperlyConfigured):
        gate_config(raw)


def test_settings_defaults() -> None:
    config = gate_config({"URL": "https://room.example/", "EVENT": EVENT})
    assert config.room_url == config.api_url == "https://room.example"
    assert config.jwks_url == "https://room.example/.well-known/jwks.json"
    assert (config.cookie_name, config.exempt_paths, config.online_check) == ("wr_pass", (), False)
    assert (config.jwks_cache_seconds, config.jwks_min_refetch_seconds) == (300, 10)


# The online check


def test_the_online_verdict_is_cached_briefly_per_pass() -> None:
    calls: list[dict[str, str]] = []
    answer = {"valid": True}

    def post(url: str, body: dict[str, str], timeout: float) -> tuple[int, bytes]:
        calls.append(body)
        return 200, json.dumps(answer).encode()

    clock = Clock()
    checker = OnlineChecker("https://room/verify", event=EVENT, ttl=10, post=post, clock=clock)
    assert checker.verdict("p1").valid
    answer = {"valid": False, "reason": "completed"}
    clock.now += 9.9
    assert checker.verdict("p1").valid
    assert calls == [{"pass": "p1", "event": EVENT}]
    clock.now += 0.1
    verdict = checker.verdict("p1")
    assert (verdict.valid, verdict.reason) == (False, "completed")
    assert len(calls) == 2


@pytest.mark.parametrize(
    "status, body", [(500, b'{"valid": true}'), (200, b"<html>"), (200, b'{"ok": 1}')]
)
def test_an_answer_that_is_not_a_verdict_means_the_room_cannot_say(status, body) -> None:
    checker = OnlineChecker(
        "https://room/verify", event=EVENT, post=lambda url, data, timeout: (status, body)
    )
    with pytest.raises(RoomUnreachable):
        checker.verdict("p1")


# The middleware, in-process (over HTTP against the real room: tests/test_django_gate.py)


def shop_view(request: HttpRequest) -> HttpResponse:
    admitted = request.waiting_room_pass
    return JsonResponse({"ticket": admitted.ticket_id if admitted else None})


@pytest.fixture
def gate(room, settings) -> Iterator[tuple[Room, WaitingRoomGateMiddleware]]:
    state, base = room
    state.publish(("room", ROOM_KEY))
    settings.WAITING_ROOM = {
        "URL": base,
        "EVENT": EVENT,
        "EXEMPT_PATHS": ["/static/"],
        "COOKIE_NAME": "pass",
    }
    yield state, WaitingRoomGateMiddleware(shop_view)


def live_pass(base: str, **changes: Any) -> str:
    now = int(time.time())
    return signed(claims(iss=base, iat=now, nbf=now, exp=now + 600, **changes))


def test_a_scheme_relative_path_is_not_an_open_redirect(gate) -> None:
    _state, middleware = gate
    token = live_pass(middleware.config.room_url)
    request = RequestFactory().get("/x", {"wr_pass": token})
    # What a server hands Django for "GET //elsewhere.example/x?wr_pass=..." (the test
    # client would read the host out of it).
    request.path = request.path_info = "//elsewhere.example/x"
    response = middleware(request)
    assert response.status_code == 302
    assert response["Location"] == "http://testserver//elsewhere.example/x"


def test_over_https_the_cookie_is_secure(gate) -> None:
    _state, middleware = gate
    token = live_pass(middleware.config.room_url)
    response = middleware(RequestFactory().get("/p", {"wr_pass": token}, secure=True))
    cookie = response.cookies["pass"]
    assert cookie.value == token
    assert cookie["secure"] and cookie["httponly"] and cookie["samesite"] == "Lax"
    assert 595 <= cookie["max-age"] <= 600
    assert response["Location"] == "https://testserver/p"


def test_a_bad_pass_in_a_link_does_not_undo_a_good_cookie(gate) -> None:
    _state, middleware = gate
    token = live_pass(middleware.config.room_url)
    request = RequestFactory().get("/p?a=1&wr_pass=stale")
    request.COOKIES["pass"] = token
    response = middleware(request)
    assert response.status_code == 302 and response["Location"] == "http://testserver/p?a=1"
    assert "pass" not in response.cookies


def test_a_post_with_a_pass_in_its_query_is_let_in_and_keeps_its_body(gate) -> None:
    _state, middleware = gate
    token = live_pass(middleware.config.room_url)
    request = RequestFactory().post(f"/cart?wr_pass={token}", {"item": "1"})
    response = middleware(request)
    assert response.status_code == 200
    assert json.loads(response.content)["ticket"] == claims()["sub"]
    assert response.cookies["pass"].value == token


def test_head_goes_to_the_room_like_get_and_exempt_paths_pass(gate) -> None:
    _state, middleware = gate
    response = middleware(RequestFactory().head("/p"))
    assert response.status_code == 302
    assert response["Location"].startswith(f"{middleware.config.room_url}/e/{EVENT}/?return=")
    assert middleware(RequestFactory().get("/static/app.css")).status_code == 200
    # A prefix, not a substring: "/x/static/" is protected.
    assert middleware(RequestFactory().get("/x/static/app.css")).status_code == 302


# Off, the room counts as unreachable for that request: FAIL_OPEN_MINUTES (0 by default, fail
# closed) decides, and the fan gets the busy page rather than the way to a room that is down.
@pytest.mark.parametrize("fail_open, status", [(True, 200), (False, 503)])
def test_when_the_online_check_cannot_reach_the_room(gate, settings, fail_open, status) -> None:
    state, middleware = gate
    settings.WAITING_ROOM = {
        **settings.WAITING_ROOM,
        "ONLINE_CHECK": True,
        "ONLINE_CHECK_FAIL_OPEN": fail_open,
    }
    middleware = WaitingRoomGateMiddleware(shop_view)
    state.verify_status, state.verify_body = 502, b"<html>bad gateway</html>"
    request = RequestFactory().get("/p")
    request.COOKIES["pass"] = live_pass(middleware.config.room_url)
    assert middleware(request).status_code == status


def test_the_online_check_refuses_what_the_room_says_has_ended(gate, settings) -> None:
    state, _ = gate
    settings.WAITING_ROOM = {**settings.WAITING_ROOM, "ONLINE_CHECK": True}
    middleware = WaitingRoomGateMiddleware(shop_view)
    state.verify_status, state.verify_body = 200, b'{"valid": false, "reason": "revoked"}'
    request = RequestFactory().get("/p")
    request.COOKIES["pass"] = live_pass(middleware.config.room_url)
    response = middleware(request)
    assert response.status_code == 302
    assert response.cookies["pass"]["max-age"] == 0


def test_the_package_imports_nothing_from_the_room() -> None:
    """It is installed into shops, where the room's code is not."""
    source = ROOT / "integrations" / "django_gate" / "waitingroom_gate"
    room_packages = {"queueing", "events", "staff", "dashboard", "config", "tests"}
    for module in source.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not {name.split(".")[0] for name in names} & room_packages, module.name
