"""The Django gate (integrations/django_gate), pip-installed into a directory of its own and
run in the example shop under gunicorn, in front of the room's real web processes. Passes
come from the room: joined over HTTP, admitted by an admission tick run here."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.utils import timezone

from events.models import Event
from events.traffic_rules import parse_traffic_rules, traffic_rules_json
from queueing.beat import event_tick
from queueing.passes.sealing import private_key_open
from queueing.passes.signing import pass_key_rotate, signing_key
from tests.edge import needs_nginx, nginx_binary, readable_dir
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


def fetch(
    url: str,
    *,
    method: str = "GET",
    cookie: str | None = None,
    headers: dict[str, str] | None = None,
) -> Answer:
    """One request, redirects not followed (the tests look at them)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = dict(headers or {})
    if cookie is not None:
        headers["Cookie"] = f"{COOKIE}={cookie}"
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
    private = private_key_open(key.private_key_sealed)
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


# ------------------------------------------------- traffic rules and the room unreachable


def rules_set(event: Event, raw: list[dict[str, Any]]) -> None:
    """As staff save them: validated, stored in the canonical form."""
    event.traffic_rules = traffic_rules_json(parse_traffic_rules(raw))
    event.full_clean()
    event.save(update_fields=["traffic_rules"])


@contextmanager
def proxy_in_front(shop: str, rundir: Path) -> Iterator[int]:
    """nginx in front of the shop on 127.0.0.1 and [::1], as the shop's one trusted proxy: it
    appends the address it saw to X-Forwarded-For. Yields its port."""
    port = free_port()
    shop_netloc = urlsplit(shop).netloc
    readable_dir(rundir)
    for temp in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        readable_dir(rundir / temp)
    conf = rundir / "nginx.conf"
    conf.write_text(
        f"""daemon off;
pid {rundir}/nginx.pid;
error_log {rundir}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {rundir}/access.log;
    client_body_temp_path {rundir}/body;
    proxy_temp_path {rundir}/proxy;
    fastcgi_temp_path {rundir}/fastcgi;
    uwsgi_temp_path {rundir}/uwsgi;
    scgi_temp_path {rundir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        listen [::1]:{port};
        location / {{
            proxy_pass http://{shop_netloc};
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}
    }}
}}
"""
    )
    binary = nginx_binary()
    assert binary is not None
    log = open(rundir / "nginx.out", "ab")
    proc = subprocess.Popen(
        [binary, "-c", str(conf), "-p", str(rundir)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def up() -> bool:
        assert proc.poll() is None, (rundir / "nginx.out").read_text()
        try:
            return fetch(f"http://[::1]:{port}/healthz").status == 200
        except OSError:
            return False

    try:
        wait_until(up, timeout=15, what="nginx in front of the shop")
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


RULES = [
    {"action": "bypass", "path": ["/products/4*"]},
    {"action": "bypass", "header": {"X-Partner-Key": "s3cret"}},
    {"action": "block", "user_agent": ["*BadBot*"]},
    {"action": "block", "ip": ["2001:db8:77::/48"]},
    # ::1, the IPv6 loopback nginx sees a fan come from
    {"action": "bypass", "ip": ["::/120"]},
]


@needs_nginx
def test_traffic_rules_through_the_shop_behind_one_trusted_proxy(
    make_event, installed_gate, tmp_path
) -> None:
    with running_stack() as stack:
        room = stack.web_at_public_url()
        event = make_event(slug=EVENT, capacity=20, rate_per_minute=0, target_url=room)
        rules_set(event, RULES)
        shop = start_shop(
            stack,
            installed_gate,
            room=room,
            SHOP_INTEGRATION_KEY=event.integration_key,
            SHOP_TRUSTED_PROXY_COUNT="1",
            SHOP_RULES_CACHE_SECONDS="1",
        )
        # Bypass by a path glob: the view, with no pass; the path next to it still queues.
        bypassed = fetch(f"{shop}/products/42")
        assert bypassed.status == 200 and bypassed.json() == {"product": 42, "pass": None}
        assert_sent_to_room(fetch(f"{shop}/products/7"), room, f"{shop}/products/7")
        # Bypass by a header's exact value.
        partner = fetch(f"{shop}/products/7", headers={"X-Partner-Key": "s3cret"})
        assert partner.status == 200
        assert fetch(f"{shop}/products/7", headers={"X-Partner-Key": "S3CRET"}).status == 302
        # Block by user agent: the 403 page, and JSON for a script's POST.
        bot = {"User-Agent": "Mozilla/5.0 (compatible; badbot/2.1)"}
        blocked = fetch(f"{shop}/products/7", headers=bot)
        assert blocked.status == 403
        assert (blocked.header("Content-Type") or "").startswith("text/html")
        assert b"blocked" in blocked.body
        refused = fetch(f"{shop}/cart", method="POST", headers=bot)
        assert refused.status == 403 and refused.json()["error"] == "traffic_blocked"
        # Exempt paths stay exempt, whoever asks.
        assert fetch(f"{shop}/static/site.css", headers=bot).status == 200
        # An IPv6 network, the client behind one trusted proxy (the last X-Forwarded-For
        # entry); what the client itself wrote before it does not count.
        in_network = fetch(f"{shop}/products/7", headers={"X-Forwarded-For": "2001:db8:77::5"})
        assert in_network.status == 403
        spoofed = fetch(
            f"{shop}/products/7", headers={"X-Forwarded-For": "2001:db8:77::5, 198.51.100.7"}
        )
        assert_sent_to_room(spoofed, room, f"{shop}/products/7")

        # The same through a real proxy: nginx writes the address the fan came from.
        with proxy_in_front(shop, tmp_path / "proxy") as port:
            over_ipv6 = fetch(f"http://[::1]:{port}/products/7")
            assert over_ipv6.status == 200 and over_ipv6.json()["pass"] is None
            over_ipv4 = fetch(f"http://127.0.0.1:{port}/products/7")
            assert over_ipv4.status == 302
            forged = fetch(
                f"http://127.0.0.1:{port}/products/7", headers={"X-Forwarded-For": "::1"}
            )
            assert forged.status == 302  # "::1, 127.0.0.1": the proxy's entry counts
            forged_block = fetch(
                f"http://127.0.0.1:{port}/products/7",
                headers={"X-Forwarded-For": "2001:db8:77::5"},
            )
            assert forged_block.status == 302
        counted = fetch(f"{shop}/healthz/gate").json()
        assert counted["traffic_bypass"] == 3 and counted["traffic_block"] == 3, counted

        # Staff change the rules: the shop applies them within RULES_CACHE_SECONDS (1 s)
        # plus a fetch; the room counts the fetches' versions, not the shop's traffic.
        changed_at = time.monotonic()
        rules_set(event, [{"action": "block", "path": ["/products/4*"]}])
        wait_until(
            lambda: fetch(f"{shop}/products/42").status == 403,
            timeout=20,
            what="the changed rules in the shop",
        )
        took = time.monotonic() - changed_at
        assert fetch(f"{shop}/products/7", headers={"X-Partner-Key": "s3cret"}).status == 302
        assert fetch(f"{shop}/products/7", headers=bot).status == 302
        print(f"\nrules changed in the room -> applied by the shop in {took:.2f} s (TTL 1 s)")


def test_without_the_right_integration_key_every_request_queues(make_event, installed_gate) -> None:
    with running_stack() as stack:
        room = stack.web_at_public_url()
        event = make_event(slug=EVENT, capacity=20, rate_per_minute=0, target_url=room)
        rules_set(event, RULES)
        shop = start_shop(stack, installed_gate, room=room, SHOP_INTEGRATION_KEY="not-the-key")
        assert_sent_to_room(fetch(f"{shop}/products/42"), room, f"{shop}/products/42")
        assert fetch(f"{shop}/healthz/gate").json()["rules_fetch_failures"] >= 1
        assert "traffic rules unavailable" in stack.log("shop")
        assert "401" in stack.log("shop")


def stop_room(stack: Stack) -> None:
    web = stack.procs["web"]
    os.killpg(web.pid, signal.SIGTERM)
    web.wait(timeout=15)


def test_the_fail_policies_with_the_room_stopped_and_started_again(
    make_event, installed_gate
) -> None:
    with running_stack() as stack:
        room = stack.web_at_public_url()
        event = make_event(slug=EVENT, capacity=20, rate_per_minute=0, target_url=room)
        rules_set(event, [{"action": "bypass", "path": ["/products/4*"]}])
        outage_settings = {
            "SHOP_INTEGRATION_KEY": event.integration_key,
            # The keys are unusable one second after the last fetch the room answered.
            "SHOP_JWKS_CACHE_SECONDS": "1",
            "SHOP_JWKS_STALE_SECONDS": "0",
            "SHOP_JWKS_MIN_REFETCH_SECONDS": "0.5",
        }
        closed = start_shop(stack, installed_gate, room=room, **outage_settings)
        window = 6.0
        opened = start_shop(
            stack,
            installed_gate,
            room=room,
            name="open-shop",
            SHOP_FAIL_OPEN_MINUTES=str(window / 60),
            **outage_settings,
        )
        _ticket, token = admitted_pass(room, EVENT)
        for shop in (closed, opened):
            assert fetch(f"{shop}/products/1", cookie=token).status == 200
            assert fetch(f"{shop}/products/42").status == 200  # rules fetched

        stop_room(stack)
        # Fail open: from the first request that cannot be checked, `window` seconds of
        # requests let through unchecked, then the busy page.
        sent = time.monotonic()
        first = wait_until(
            lambda: (
                (a := fetch(f"{opened}/products/1", cookie=token)).status == 200
                and a.json()["pass"] == "unchecked"
                and a
            ),
            timeout=20,
            what="the open shop letting requests through unchecked",
        )
        assert first.json() == {"product": 1, "pass": "unchecked"}
        started_by = time.monotonic()
        answers: list[int] = []
        while time.monotonic() < started_by + window + 3:
            asked = time.monotonic()
            status = fetch(f"{opened}/products/1").status
            answers.append(status)
            if time.monotonic() < sent + window:
                assert status == 200, answers
            if asked > started_by + window:
                assert status == 503, answers
            time.sleep(0.1)
        assert 200 in answers and answers[-1] == 503
        let_through = 1 + answers.count(200)
        assert fetch(f"{opened}/healthz/gate").json()["room_unreachable_let_through"] == (
            let_through
        )
        log = stack.log("open-shop")
        assert log.count("request let through unchecked") == let_through
        assert f"failing open for at most {window:g} s" in log
        assert "fail-open window is over" in log

        # Fail closed: the busy page, pass or not; the last good rules still apply.
        busy = fetch(f"{closed}/products/1", cookie=token)
        assert busy.status == 503, busy.body
        assert busy.header("Retry-After") == "5"
        assert "no-store" in (busy.header("Cache-Control") or "")
        assert fetch(f"{closed}/products/1").status == 503
        assert fetch(f"{closed}/cart", method="POST").json()["error"] == "unavailable"
        assert fetch(f"{closed}/products/42").status == 200
        assert fetch(f"{closed}/healthz/gate").json()["room_unreachable_let_through"] == 0
        assert "waiting room unreachable (no keys): failing closed" in stack.log("shop")

        # The room is back (same address): both shops check passes again.
        stack.web(port=urlsplit(room).port)
        for shop in (closed, opened):
            wait_until(
                lambda shop=shop: fetch(f"{shop}/products/1", cookie=token).status == 200,
                timeout=20,
                what="the shop checking passes again",
            )
            assert_sent_to_room(fetch(f"{shop}/products/2"), room, f"{shop}/products/2")
        assert "waiting room reachable again (no keys)" in stack.log("open-shop")
