"""What the Queue-it tests share (tests/queueing/web/test_queueit.py in process,
tests/test_queueit_connector.py with the real connector): the waiting page's config, the
token a redirect carries, the Node shop behind Queue-it's connector, and a browser that goes
between that shop and the room."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest

from tests.processes import free_port, wait_until


def page_config(html: str) -> Any:
    """The waiting page's own config (its ``wr-config`` script element)."""
    raw = re.search(r'<script id="wr-config" type="application/json">(.*?)</script>', html, re.S)
    assert raw is not None, html[:500]
    return json.loads(raw.group(1))


def token_of(location: str) -> str:
    """The ``queueittoken`` of a redirect's URL."""
    return parse_qs(urlsplit(location).query)["queueittoken"][0]


# ------------------------------------------------ the real connector in a Node shop

SHOP_DIR = Path(__file__).resolve().parent.parent / "integrations" / "queueit_node_shop"
CONNECTOR = SHOP_DIR / "node_modules" / "@queue-it" / "connector-javascript"

# The mark of the tests that run the Node shop (scripts/ensure_node_shop.sh installs it).
needs_node_shop = pytest.mark.skipif(
    shutil.which("node") is None or not CONNECTOR.is_dir(),
    reason="node or the shop's connector is missing: scripts/ensure_node_shop.sh installs it "
    "(make test runs it)",
)


@contextmanager
def node_shop(
    *,
    customer_id: str,
    secret_key: str,
    event_id: str,
    queue_domain: str,
    logdir: Path,
    enqueue_tokens: bool = False,
) -> Iterator[str]:
    """integrations/queueit_node_shop/shop.js on a loopback port, configured as a Queue-it
    shop is (customer id, secret key, event id, queue domain; with ``enqueue_tokens``, Queue-it's
    enqueue-token provider too); its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "QUEUEIT_CUSTOMER_ID": customer_id,
        "QUEUEIT_SECRET_KEY": secret_key,
        "QUEUEIT_EVENT_ID": event_id,
        "QUEUEIT_QUEUE_DOMAIN": queue_domain,
        "SHOP_PORT": str(port),
        "QUEUEIT_ENQUEUE_TOKEN": "1" if enqueue_tokens else "0",
    }
    log = open(logdir / "shop.log", "ab")
    proc = subprocess.Popen(
        ["node", str(SHOP_DIR / "shop.js")],
        cwd=SHOP_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{base}/healthz", proc), timeout=20, what="the Node shop")
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        log.close()


def _answers(url: str, proc: subprocess.Popen[bytes]) -> bool:
    if proc.poll() is not None:
        raise AssertionError("the Node shop exited (see its shop.log)")
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@dataclass
class Hop:
    url: str
    status: int
    headers: dict[str, str]
    body: str

    @property
    def location(self) -> str:
        return self.headers.get("location", "")

    def json(self) -> Any:
        return json.loads(self.body)


class TwoSiteBrowser:
    """A browser between the shop (plain HTTP) and the room (HTTPS through nginx, trusting
    exactly the test's certificate), with one cookie jar per site (scheme, host and port):
    the shop's connector cookie never reaches the room, nor the room's cookies the shop."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self.tls = tls
        self.jars: dict[str, dict[str, str]] = {}

    def jar(self, url: str) -> dict[str, str]:
        parts = urlsplit(url)
        return self.jars.setdefault(f"{parts.scheme}://{parts.netloc}", {})

    def get(self, url: str, headers: dict[str, str] | None = None) -> Hop:
        parts = urlsplit(url)
        sent = dict(headers or {})
        jar = self.jar(url)
        if jar:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in jar.items())
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                parts.hostname, parts.port, context=self.tls, timeout=30
            )
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        try:
            conn.request("GET", target, headers=sent)
            response = conn.getresponse()
            body = response.read().decode(errors="replace")
            cookies = response.headers.get_all("Set-Cookie") or []
            seen = {k.lower(): v for k, v in response.getheaders()}
            status = response.status
        finally:
            conn.close()
        for line in cookies:
            for name, morsel in SimpleCookie(line).items():
                gone = morsel["max-age"] == "0" or "1970" in morsel["expires"]
                if gone or not morsel.value:
                    jar.pop(name, None)
                else:
                    jar[name] = morsel.value
        if cookies:
            seen["set-cookie"] = "\n".join(cookies)
        return Hop(url=url, status=status, headers=seen, body=body)

    def follow(
        self, url: str, *, hops: int = 10, headers: dict[str, str] | None = None
    ) -> list[Hop]:
        """Each answer until one is not a redirect (relative Locations resolved)."""
        seen = [self.get(url, headers)]
        while seen[-1].status in (301, 302, 303, 307) and len(seen) <= hops:
            seen.append(self.get(urljoin(seen[-1].url, seen[-1].location)))
        return seen


def connector_actions(
    config: Any, requests: list[dict[str, Any]], *, customer_id: str, secret_key: str
) -> list[str]:
    """The action Queue-it's own connector takes for each request under ``config``
    (integrations/queueit_node_shop/match_config.js): "Ignore", "Queue" or "" (no match)."""
    job = {"customerId": customer_id, "secretKey": secret_key, "config": config}
    result = subprocess.run(
        ["node", str(SHOP_DIR / "match_config.js")],
        input=json.dumps({**job, "requests": requests}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=SHOP_DIR,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
