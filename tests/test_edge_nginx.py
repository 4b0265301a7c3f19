"""nginx in front of two web processes, as deploy/nginx/ configures it for production: TLS,
the client's address for the room's one trusted proxy, WebSockets, static files from disk, and
nginx's own "busy" answer while no web process answers, which costs no fan a place."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.utils import timezone
from websockets.sync.client import connect

from queueing.live.ticks import broadcast_tick
from tests.edge import PAGES, PRODUCTION, Browser, Nginx, needs_nginx
from tests.faults import kill_process_group
from tests.processes import (
    Stack,
    free_port,
    production_static_root,
    running_stack,
    wait_until,
)

pytestmark = [
    pytest.mark.processes,
    pytest.mark.django_db(transaction=True),
    needs_nginx,
]

WEB_NAMES = ("web1", "web2")


@dataclass
class Edge:
    stack: Stack
    nginx: Nginx
    ports: dict[str, int]

    def fan(self, source: str = "127.0.0.1") -> Browser:
        return Browser(self.nginx.base_url, self.nginx.tls, source=source)

    def web_start(self, name: str) -> None:
        self.stack.web(workers=1, port=self.ports[name], name=name)

    def web_kill(self, name: str) -> None:
        kill_process_group(self.stack.procs[name])


@pytest.fixture(scope="module")
def static_root() -> Path:
    """collectstatic's output under production settings, which nginx serves (the image runs
    it at build time), and whose manifest the web processes name files by."""
    return production_static_root()


@pytest.fixture
def edge(static_root) -> Iterator[Edge]:
    ports = {name: free_port() for name in WEB_NAMES}
    with (
        tempfile.TemporaryDirectory(prefix="wr-nginx-") as rundir,
        running_stack(**PRODUCTION) as stack,
    ):
        nginx = Nginx(
            Path(rundir),
            web_servers=[f"127.0.0.1:{port}" for port in ports.values()],
            static_root=static_root,
        )
        stack.env["WR_PUBLIC_URL"] = nginx.base_url
        result = Edge(stack=stack, nginx=nginx, ports=ports)
        for name in WEB_NAMES:
            result.web_start(name)
        nginx.start()
        try:
            yield result
        finally:
            nginx.stop()


def page_join(fan: Browser, slug: str) -> dict:
    """Join through the waiting page's form, as a browser does; the page's own config back."""
    form = fan.request("GET", f"/e/{slug}/")
    assert form.status == 200, form.body
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.body).group(1)
    joined = fan.request("POST", f"/e/{slug}/", form={"csrfmiddlewaretoken": token})
    if joined.status in (302, 303):
        assert joined.headers["location"].endswith(f"/e/{slug}/")
        joined = fan.request("GET", f"/e/{slug}/")
    assert joined.status == 200, (joined.status, joined.body)
    return page_config(joined.body)


def page_config(html: str) -> dict:
    raw = re.search(r'<script id="wr-config" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(raw.group(1))


def page_position(html: str) -> int:
    return int(re.search(r'<dd id="position">(\d+)</dd>', html).group(1))


def test_fans_reach_the_room_through_nginx(make_event, edge) -> None:
    event = make_event(slug="edge", capacity=0, rate_per_minute=0, heartbeat_seconds=600)
    fan = edge.fan(source="127.0.0.5")
    config = page_join(fan, "edge")
    assert {"wr_id", f"wr_ticket_{event.id}"} <= set(fan.cookies)
    # The room saw HTTPS (no redirect under DJANGO_SSL_REDIRECT), so its cookies are Secure.
    assert all("; secure" in line.lower() for line in fan.set_cookie_lines)
    status = fan.request("GET", f"/api/v1/tickets/{config['ticket']}")
    assert (status.status, status.body["position"]) == (200, 1)

    # The join limit (3 a minute per address) counts the address nginx saw, not nginx's own:
    # 127.0.0.5 spends its three, and a forged X-Forwarded-For does not buy another;
    # 127.0.0.6, behind the same nginx, has all of its own.
    for _ in range(2):
        assert api_join(edge.fan(source="127.0.0.5")).status == 201
    for headers in ({}, {"X-Forwarded-For": "198.51.100.7"}):
        refused = api_join(edge.fan(source="127.0.0.5"), headers)
        assert (refused.status, refused.body["error"]) == (429, "rate_limited"), headers
    assert api_join(edge.fan(source="127.0.0.6")).status == 201

    # WebSockets go through, and so do ticks.
    ws_url = edge.nginx.base_url.replace("https://", "wss://")
    ws_url += f"/ws/events/edge/?ticket={config['ticket']}"
    with connect(ws_url, ssl=edge.nginx.tls, origin=fan.origin, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "snapshot"
        assert broadcast_tick(event_id=event.id, now=timezone.now())
        tick = json.loads(ws.recv(timeout=10))
        assert (tick["type"], tick["queue_length"]) == ("tick", 4)

    # Static files come from disk, by production's names: the page asks for each by its
    # content's hash, which nginx lets browsers keep for a year (a release names its files
    # anew). The web processes would not serve them (WR_SERVE_STATIC=0).
    page = fan.request("GET", "/e/edge/")
    hashed = re.search(r'"(/static/queueing/waiting\.[0-9a-f]{12}\.css)"', page.body).group(1)
    css = fan.request("GET", hashed)
    assert css.status == 200 and css.headers["content-type"].startswith("text/css")
    assert css.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert plain_get(edge.ports["web1"], hashed).status == 404
    # A name without its hash (nginx's own busy page asks for one): kept briefly, revalidated.
    css = fan.request("GET", "/static/queueing/waiting.css")
    assert css.status == 200 and css.headers["content-type"].startswith("text/css")
    assert css.headers["cache-control"] == "public, max-age=300" and "last-modified" in css.headers

    # A body over the room's limit (64 KiB) gets the room's 400; one over nginx's (1 MiB)
    # gets the same answer from nginx, never an HTML page under /api/.
    for size in (100_000, 2_000_000):
        big = api_join(fan, body={"pad": "x" * size})
        assert (big.status, big.body["error"]) == (400, "bad_request"), size
        assert big.headers["content-type"] == "application/json"
        # The room's answers carry its security headers; nginx's own do not.
        assert ("x-frame-options" in big.headers) == (size < 1_000_000), size

    # Never through the edge: the room's figures.
    assert fan.request("GET", "/metrics").status == 404
    # Plain HTTP is sent to the public URL.
    redirect = plain_get(edge.nginx.http_port, "/e/edge/")
    assert redirect.status == 301
    assert redirect.getheader("Location") == f"{edge.nginx.base_url}/e/edge/"

    # One web process down: every request still gets its answer, from the other.
    edge.web_kill("web1")
    for _ in range(6):
        assert fan.request("GET", f"/api/v1/tickets/{config['ticket']}").status == 200
    assert api_join(edge.fan(source="127.0.0.7")).status == 201


def test_while_no_web_process_answers_fans_keep_their_place(make_event, edge) -> None:
    make_event(slug="busy", capacity=0, rate_per_minute=0, heartbeat_seconds=600)
    others = [edge.fan(source="127.0.0.9") for _ in range(2)]
    for other in others:
        assert other.request("POST", "/api/v1/events/busy/join", json_body={}).status == 201
    fan = edge.fan()
    config = page_join(fan, "busy")
    ticket = config["ticket"]
    before = fan.request("GET", f"/api/v1/tickets/{ticket}").body
    assert before["position"] == 3
    cookies = dict(fan.cookies)

    for name in WEB_NAMES:
        edge.web_kill(name)

    page = fan.request("GET", "/e/busy/")
    assert page.status == 503
    assert page.headers["retry-after"] == "5"
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-store"
    assert '<meta http-equiv="refresh" content="5">' in page.body
    assert "You keep your place" in page.body
    assert "/static/queueing/waiting.css" in page.body  # the room's look, served by nginx
    assert fan.request("GET", "/static/queueing/waiting.css").status == 200

    # A form's POST gets the same page; API clients get the room's JSON error instead.
    assert fan.request("POST", "/e/busy/", form={"csrfmiddlewaretoken": "x"}).status == 503
    replies = [page]
    for method, path, body in (
        ("GET", f"/api/v1/tickets/{ticket}", None),
        ("POST", "/api/v1/events/busy/join", {}),
    ):
        reply = fan.request(method, path, json_body=body)
        assert reply.status == 503, (method, path)
        assert reply.headers["content-type"] == "application/json"
        assert reply.headers["retry-after"] == "5"
        assert reply.body["error"] == "unavailable" and reply.body["detail"]
        replies.append(reply)
    # Nothing nginx said touched a cookie.
    for reply in replies:
        assert "set-cookie" not in reply.headers and "clear-site-data" not in reply.headers
    assert fan.cookies == cookies

    for name in WEB_NAMES:
        edge.web_start(name)
    # nginx leaves a process that refused it out for fail_timeout (2 s), then tries it again.
    after = wait_until(
        lambda: (r := fan.request("GET", f"/api/v1/tickets/{ticket}")).status == 200 and r,
        timeout=5,
        what="nginx to use the web processes again",
    )
    assert (after.body["status"], after.body["position"]) == ("waiting", before["position"])
    back = fan.request("GET", "/e/busy/")  # what the busy page's refresh asks for
    assert back.status == 200
    assert page_config(back.body)["ticket"] == ticket
    assert page_position(back.body) == before["position"]


def api_join(fan: Browser, headers: dict[str, str] | None = None, body: dict | None = None):
    return fan.request("POST", "/api/v1/events/edge/join", json_body=body or {}, headers=headers)


def plain_get(port: int, path: str) -> http.client.HTTPResponse:
    """Plain HTTP: to nginx's redirecting port, or straight to a web process as nginx talks
    to it (saying the client came over HTTPS, as nginx does)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"X-Forwarded-Proto": "https"})
        response = conn.getresponse()
        response.read()
        return response
    finally:
        conn.close()


@pytest.fixture
def lone_nginx(static_root) -> Iterator[Nginx]:
    """nginx with no web process behind it, its pages read from a copy of deploy/nginx/pages
    in a directory closed to other users (mode 0700), as a checkout in a home directory is."""
    with (
        tempfile.TemporaryDirectory(prefix="wr-closed-") as closed,
        tempfile.TemporaryDirectory(prefix="wr-nginx-") as rundir,
    ):
        pages = Path(closed) / "pages"
        shutil.copytree(PAGES, pages)
        Path(closed).chmod(0o700)
        nothing_listens = f"127.0.0.1:{free_port()}"
        nginx = Nginx(
            Path(rundir), web_servers=[nothing_listens], static_root=static_root, pages=pages
        )
        nginx.start()
        try:
            yield nginx
        finally:
            nginx.stop()


def test_nginx_answers_with_its_own_pages_wherever_the_checkout_sits(lone_nginx) -> None:
    """nginx's workers (www-data) cannot read a checkout in a directory of mode 0700: the rig
    hands them copies they can read, so the busy page is served rather than nginx's 403, and
    an oversized body gets the room's JSON (docs/gate-nginx.md says what nginx must read)."""
    fan = Browser(lone_nginx.base_url, lone_nginx.tls)
    page = fan.request("GET", "/e/anything/")
    assert page.status == 503, (page.status, page.body[:300])
    assert "You keep your place" in page.body
    huge = {"x": "y" * 2_000_000}
    too_large = fan.request("POST", "/api/v1/events/anything/join", json_body=huge)
    assert too_large.status == 400, (too_large.status, too_large.body)
    assert too_large.body["error"] == "bad_request"


def test_the_access_log_keeps_no_credential(lone_nginx) -> None:
    """Place-link tokens, tickets and passes, in the path, the query or the Referer, are not
    written to nginx's access log; where they were is. (nginx's error log still names the
    request of a failed upstream call, as here: docs/gate-nginx.md says so.)"""
    fan = Browser(lone_nginx.base_url, lone_nginx.tls)
    secrets = {
        "/e/show/move/LINKSECRET1": "/e/show/move/[token]",
        "/api/v1/tickets/TICKETSECRET2": "/api/v1/tickets/[ticket]",
        "/api/v1/tickets/TICKETSECRET3/reenter": "/api/v1/tickets/[ticket]/reenter",
        "/shop/?a=1&wr_pass=PASSSECRET4": "/shop/?[credential]",
        "/ws/events/show/?ticket=TICKETSECRET5": "/ws/events/show/?[credential]",
    }
    for path in secrets:
        fan.request("GET", path, headers={"Referer": f"{lone_nginx.base_url}{path}"})
    fan.request("GET", "/e/show/?return=https%3A%2F%2Fshop.example%2F")
    wait_until(lambda: "return=" in lone_nginx.log(), timeout=10, what="the access log")
    log = "\n".join(line for line in lone_nginx.log().splitlines() if line.startswith("127."))
    assert "SECRET" not in log, log
    for masked in secrets.values():
        assert f"GET {masked} HTTP" in log, (masked, log)


def test_a_joins_request_id_is_nginxs_in_its_log_the_answer_and_the_web_log(
    make_event, edge
) -> None:
    """nginx names the request (a client's own id is not trusted: nothing stands in front of
    it), the room answers that id and logs it with the join (docs/operations.md, "Logs,
    traces and errors")."""
    make_event(slug="traced", capacity=0, rate_per_minute=0)
    joined = edge.fan(source="127.0.0.9").request(
        "POST",
        "/api/v1/events/traced/join",
        json_body={},
        headers={"X-Request-ID": "forged-0001"},
    )
    assert joined.status == 201, joined.body
    request_id = joined.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id), request_id
    wait_until(lambda: request_id in edge.nginx.log(), timeout=10, what="nginx's access log")
    (line,) = [line for line in edge.nginx.log().splitlines() if request_id in line]
    assert "POST /api/v1/events/traced/join" in line and line.endswith(f" {request_id}")

    def logged() -> bool:
        for name in WEB_NAMES:
            for raw in edge.stack.log(name).splitlines():
                entry = json.loads(raw)  # DEBUG off: every line one JSON object
                if entry["message"] == "joined" and request_id in entry["request_ids"]:
                    return True
        return False

    wait_until(logged, timeout=10, what="the web process's joined line")
