"""The Django gate (integrations/django_gate), pip-installed into a directory of its own and
run in the example shop under gunicorn, in front of the room's real web processes. Passes
come from the room: joined over HTTP, admitted by an admission tick run here."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.utils import timezone

from events.models import Event
from queueing.beat import event_tick
from queueing.passes.signing import pass_key_rotate, signing_key
from tests.http import pass_complete, request
from tests.processes import BIN, ROOT, Stack, free_port, running_stack, wait_until

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

GATE_SOURCE = ROOT / "integrations" / "django_gate"
SHOP_DIR = GATE_SOURCE / "example_shop"
COOKIE = "shop_wr_pass"  # example_shop/settings.py
EVENT = "spring-tour"


@pytest.fixture(scope="module")
def installed_gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package as `pip install ./integrations/django_gate` installs it, in a directory
    of its own, so the shop runs what a wheel holds, not the source tree."""
    target = tmp_path_factory.mktemp("gate-install")
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "-q", "--no-deps"),
            *("--target", str(target), str(GATE_SOURCE)),
        ],
        check=True,
        timeout=300,
    )
    assert (target / "waitingroom_gate" / "middleware.py").is_file()
    assert list(target.glob("waitingroom_django_gate-*.dist-info"))
    return target


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def set_cookies(self) -> list[str]:
        return [v for k, v in self.headers if k.lower() == "set-cookie"]

    def json(self) -> Any:
        return json.loads(self.body)


def fetch(url: str, *, method: str = "GET", cookie: str | None = None) -> Answer:
    """One request, redirects not followed (the tests look at them)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Cookie": f"{COOKIE}={cookie}"} if cookie is not None else {}
    body = b"{}" if method == "POST" else None
    if body is not None:
        headers["Content-Type"] = "application/json"
    try:
        connection.request(
            method, parts.path + (f"?{parts.query}" if parts.query else ""), body, headers
        )
        response = connection.getresponse()
        return Answer(response.status, response.getheaders(), response.read())
    finally:
        connection.close()


def start_shop(stack: Stack, gate: Path, *, room: str, name: str = "shop", **settings: str) -> str:
    port = free_port()
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "example_shop.settings",
            "PYTHONPATH": f"{gate}{os.pathsep}{SHOP_DIR}",
            "PYTHONUNBUFFERED": "1",
            "SHOP_ROOM_URL": room,
            "SHOP_EVENT": EVENT,
            **settings,
        }
    )
    log = open(stack.logdir / f"{name}.log", "ab")  # kept open by the process
    # Added to the stack's processes: stopped with them, its log printed when a test fails.
    stack.procs[name] = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "example_shop.wsgi:application",
            *("-b", f"127.0.0.1:{port}", "--chdir", str(SHOP_DIR)),
            # One process, so that its JWKS cache is the one the test reasons about; threads,
            # so that the cache is shared the way it is in production.
            *("-w", "1", "-k", "gthread", "--threads", "4"),
            *("--graceful-timeout", "2", "--no-control-socket"),
        ],
        cwd=SHOP_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return fetch(f"{base}/healthz").status == 200
        except OSError:
            return False

    wait_until(up, timeout=30, what=f"the example shop ({name})")
    return base


def admitted_pass(room: str, slug: str) -> tuple[str, str]:
    """A fan joins over HTTP and is admitted: (ticket, pass)."""
    ticket = request("POST", f"{room}/api/v1/events/{slug}/join", {}).body["ticket"]
    event_tick(event_id=Event.objects.get(slug=slug).id, now=timezone.now())
    status = request("GET", f"{room}/api/v1/tickets/{ticket}").body
    assert status["status"] == "admitted", status
    return ticket, status["pass"]


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def room_signed(claims: dict[str, Any]) -> str:
    """Signed with the room's own signing key: only the claims can be wrong."""
    key = signing_key(now=timezone.now())
    private = serialization.load_pem_private_key(key.private_pem.encode(), password=None)
    return jwt.encode(claims, private, algorithm="EdDSA", headers={"kid": key.kid})


def room_entry(room: str, return_url: str) -> str:
    return f"{room}/e/{EVENT}/?return={quote(return_url, safe='')}"


def assert_sent_to_room(answer: Answer, room: str, return_url: str, what: str = "") -> None:
    assert answer.status == 302, (what, answer.status, answer.body)
    assert answer.header("Location") == room_entry(room, return_url), what
    assert "no-store" in (answer.header("Cache-Control") or "")


def assert_cookie_cleared(answer: Answer) -> None:
    cleared = [c for c in answer.set_cookies() if c.startswith(f"{COOKIE}=")]
    assert len(cleared) == 1 and "Max-Age=0" in cleared[0], answer.set_cookies()


def test_the_shop_lets_in_only_fans_with_a_valid_pass(make_event, installed_gate) -> None:
    with running_stack() as stack:
        room = stack.web_at_public_url()
        shop = start_shop(stack, installed_gate, room=room)
        make_event(slug=EVENT, capacity=20, rate_per_minute=0, target_url=f"{shop}/products/1")
        make_event(slug="other-show", capacity=20, rate_per_minute=0, target_url=shop)

        # No pass: to the room, which is told where the fan was going.
        assert_sent_to_room(
            fetch(f"{shop}/products/7?colour=dark%20red&size=m"),
            room,
            f"{shop}/products/7?colour=dark%20red&size=m",
        )
        # Exempt paths need no pass.
        assert fetch(f"{shop}/static/site.css").status == 200
        assert fetch(f"{shop}/healthz").body == b"ok"
        assert fetch(f"{shop}/webhooks/payment", method="POST").json() == {"received": True}
        # An API call without a pass: 403 with the room's URL, not a redirect it cannot follow.
        refused = fetch(f"{shop}/cart", method="POST")
        assert refused.status == 403
        assert refused.json()["error"] == "pass_required"
        assert refused.json()["waiting_room_url"] == room_entry(room, f"{shop}/cart")
        assert refused.header("X-Waiting-Room-Location") == room_entry(room, f"{shop}/cart")

        # The room sends the admitted fan back with the pass in the query: it becomes a cookie
        # and the fan lands on the same URL without it.
        ticket, token = admitted_pass(room, EVENT)
        redirect_url = request("GET", f"{room}/api/v1/tickets/{ticket}").body["redirect_url"]
        assert redirect_url == f"{shop}/products/1?wr_pass={token}"
        landing = fetch(f"{shop}/products/7?colour=dark%20red&wr_pass={token}&size=m")
        assert landing.status == 302
        assert landing.header("Location") == f"{shop}/products/7?colour=dark%20red&size=m"
        (cookie,) = landing.set_cookies()
        attributes = [a.strip() for a in cookie.split(";")]
        assert attributes[0] == f"{COOKIE}={token}"
        assert {"HttpOnly", "SameSite=Lax", "Path=/"} <= set(attributes)
        assert "Secure" not in attributes  # plain http here; https adds it
        max_age = int(next(a for a in attributes if a.startswith("Max-Age=")).split("=")[1])
        assert 0 < max_age <= claims_of(token)["exp"] - time.time() + 1

        # With the cookie, the shop's own views answer and see the pass.
        page = fetch(f"{shop}/products/7", cookie=token)
        assert page.status == 200
        assert page.json() == {
            "product": 7,
            "pass": {
                "event": EVENT,
                "ticket_id": claims_of(token)["sub"],
                "tier": claims_of(token)["tier"],
                "expires_at": page.json()["pass"]["expires_at"],
            },
        }
        assert "Cookie" in (page.header("Vary") or "")
        assert fetch(f"{shop}/cart", method="POST", cookie=token).json()["added"] is True

        now = int(time.time())
        good = claims_of(token)
        assert fetch(f"{shop}/products/2", cookie=room_signed(good)).status == 200  # control
        forger = Ed25519PrivateKey.generate()
        room_kid = jwt.get_unverified_header(token)["kid"]
        refused_passes = {
            "expired": room_signed({**good, "iat": now - 900, "nbf": now - 900, "exp": now - 60}),
            "not yet valid": room_signed({**good, "nbf": now + 600}),
            "forged, the room's kid": jwt.encode(
                good, forger, algorithm="EdDSA", headers={"kid": room_kid}
            ),
            "forged, its own kid": jwt.encode(
                good, forger, algorithm="EdDSA", headers={"kid": "forged"}
            ),
            "another on-sale's": admitted_pass(room, "other-show")[1],
            "another issuer's": room_signed({**good, "iss": "https://elsewhere.example"}),
            "garbage": "not-a-pass",
        }
        for what, bad in refused_passes.items():
            as_cookie = fetch(f"{shop}/products/3", cookie=bad)
            assert_sent_to_room(as_cookie, room, f"{shop}/products/3", what)
            assert_cookie_cleared(as_cookie)
            as_query = fetch(f"{shop}/products/3?wr_pass={quote(bad)}")
            assert_sent_to_room(as_query, room, f"{shop}/products/3", what)
            assert as_query.set_cookies() == [], what
            assert fetch(f"{shop}/cart", method="POST", cookie=bad).status == 403, what


def test_a_pass_signed_with_a_rotated_key_is_accepted_before_the_cache_expires(
    make_event, installed_gate
) -> None:
    with running_stack() as stack:
        room = stack.web_at_public_url()
        # The JWKS stays cached for its default 300 s; refetches at most once a second here.
        shop = start_shop(stack, installed_gate, room=room, SHOP_JWKS_MIN_REFETCH_SECONDS="1")
        make_event(slug=EVENT, capacity=20, rate_per_minute=0, target_url=shop)
        ticket, old_pass = admitted_pass(room, EVENT)
        assert fetch(f"{shop}/products/1", cookie=old_pass).status == 200  # JWKS now cached

        # The room rotates its key with no notice: the new key signs at once, and the shop's
        # cached JWKS does not have it.
        new_key = pass_key_rotate(now=timezone.now(), activate_in=timedelta(0))
        new_pass = request("GET", f"{room}/api/v1/tickets/{ticket}").body["pass"]
        assert jwt.get_unverified_header(new_pass)["kid"] == new_key.kid
        assert new_key.kid != jwt.get_unverified_header(old_pass)["kid"]
        time.sleep(1.1)  # past the refetch rate limit since the first fetch

        landing = fetch(f"{shop}/products/1?wr_pass={new_pass}")
        assert landing.status == 302 and landing.header("Location") == f"{shop}/products/1"
        assert fetch(f"{shop}/products/1", cookie=new_pass).status == 200
        # The superseded key stays published (and cached): passes it signed still work.
        assert fetch(f"{shop}/products/1", cookie=old_pass).status == 200


def test_the_online_check_sees_a_completed_session_that_offline_verification_cannot(
    make_event, installed_gate
) -> None:
    with running_stack() as stack:
        room = stack.web_at_public_url()
        offline_shop = start_shop(stack, installed_gate, room=room)
        online_shop = start_shop(
            stack,
            installed_gate,
            room=room,
            name="online-shop",
            SHOP_ONLINE_CHECK="1",
            SHOP_ONLINE_CHECK_CACHE_SECONDS="1",
        )
        event = make_event(slug=EVENT, capacity=20, rate_per_minute=0, target_url=offline_shop)
        _ticket, token = admitted_pass(room, EVENT)
        assert fetch(f"{online_shop}/products/1", cookie=token).status == 200

        pass_complete(room, event.integration_key, token)
        time.sleep(1.1)  # the online shop's cached verdict runs out

        refused = fetch(f"{online_shop}/products/1", cookie=token)
        assert_sent_to_room(refused, room, f"{online_shop}/products/1")
        assert_cookie_cleared(refused)
        # The limit the README states: offline, a completed pass still opens the shop until exp.
        assert fetch(f"{offline_shop}/products/1", cookie=token).status == 200
