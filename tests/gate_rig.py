"""The gate's nginx rig, shared by the tests that put the room in front of a shop
(tests/test_gate_nginx.py, tests/test_gate_journey_browser.py): the real room (gunicorn at its
public URL), the sample shop (tests/echo_shop.py) and deploy/nginx/gate.conf.template run by
Debian's nginx on a loopback TLS port in front of it."""

from __future__ import annotations

import shutil
import socket
import ssl
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.utils import timezone

from events.models import Event
from queueing.beat import event_tick
from tests.edge import Browser, Nginx, readable_dir, self_signed_certificate
from tests.http import request
from tests.processes import ROOT, Stack, free_port, running_stack, wait_until

TEMPLATE = ROOT / "deploy" / "nginx" / "gate.conf.template"
SLUG = "sale"
# How long a web process trusts a session status it read (tests/test_gate_nginx.py's bound).
STATE_SECONDS = 1.0
# How long a web process applies the traffic rules it read (tests/test_gate_traffic_nginx.py).
RULES_SECONDS = 1.0
# The one proxy the shop's nginx trusts to name the fan (X-Forwarded-For): a loopback address
# of its own, so that a test's client can be it or not (tests/edge.py's Browser source).
TRUSTED_PROXY = "127.0.0.2"
ROOM = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "gate-test-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    # The test process's own: pass-signing keys one of them sealed, the other opens.
    "WR_PASS_KEY_ENCRYPTION_KEY": ",".join(settings.WR_PASS_KEY_ENCRYPTION_KEYS),
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    # The room on plain HTTP on loopback: in production the shop's nginx asks it over HTTPS.
    "DJANGO_SSL_REDIRECT": "0",
    "DJANGO_SECURE_COOKIES": "0",
    "DJANGO_HSTS_SECONDS": "0",
    "WR_GATE_STATE_SECONDS": str(STATE_SECONDS),
    "WR_TRAFFIC_RULES_SECONDS": str(RULES_SECONDS),
}


class GateNginx(Nginx):
    """nginx with the gate's template in front of the shop, on a loopback TLS port."""

    def __init__(
        self,
        rundir: Path,
        *,
        shop: str,
        room: str,
        unreachable: str = "closed",
        fail_open_minutes: float = 0.0,
    ) -> None:
        self.rundir = readable_dir(rundir)
        # The open policy's window and log of unchecked requests: written by the workers.
        self.state_dir = self.rundir / "unreachable"
        self.state_dir.mkdir()
        shutil.chown(self.state_dir, user="www-data")
        self.https_port = free_port()
        self.base_url = f"https://127.0.0.1:{self.https_port}"
        cert, key = self_signed_certificate(self.rundir)
        self.tls = ssl.create_default_context(cafile=str(cert))
        self.env = {
            "NGINX_TEMPLATE": str(TEMPLATE),
            "NGINX_RUN_DIR": str(self.rundir),
            "GATE_HTTPS_LISTEN": f"127.0.0.1:{self.https_port}",
            "GATE_TLS_CERT": str(cert),
            "GATE_TLS_KEY": str(key),
            "GATE_SHOP_SERVER": shop,
            "GATE_ROOM_SERVER": room,
            "GATE_ROOM_SCHEME": "http",
            "GATE_ROOM_HOST": "127.0.0.1",
            "GATE_ROOM_CA": "/etc/ssl/certs/ca-certificates.crt",
            "GATE_SLUG": SLUG,
            "GATE_TRUSTED_PROXY": TRUSTED_PROXY,
            "GATE_UNREACHABLE": unreachable,
            "GATE_FAIL_OPEN_MINUTES": f"{fail_open_minutes:g}",
            "GATE_FAIL_OPEN_DIR": str(self.state_dir),
        }
        self.proc = None


@dataclass
class GatedShop:
    stack: Stack
    room: str  # the room's base URL (its WR_PUBLIC_URL)
    nginx: GateNginx

    def fan(self, source: str = "127.0.0.1") -> Browser:
        """A fan's browser, connecting from ``source`` (TRUSTED_PROXY: the proxy in front)."""
        return Browser(self.nginx.base_url, self.nginx.tls, source=source)

    def room_location(self, path: str) -> str:
        return f"{self.room}/e/{SLUG}/?return={quote(self.nginx.base_url + path, safe='')}"

    def admitted_pass(self, event: Event) -> str:
        """A pass as a fan gets it: join, be admitted (the tick run here), poll the room."""
        joined = request("POST", f"{self.room}/api/v1/events/{event.slug}/join", {})
        assert joined.status == 201, joined.body
        event_tick(event_id=event.id, now=timezone.now())
        status = request("GET", f"{self.room}/api/v1/tickets/{joined.body['ticket']}")
        assert status.body["status"] == "admitted", status.body
        return status.body["pass"]


def _shop_up(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def gated_shop(
    *, unreachable: str = "closed", fail_open_minutes: float = 0.0
) -> Iterator[GatedShop]:
    """The room (one web process), the sample shop and nginx with the gate in front of it,
    with the policy ``unreachable`` (closed, open) for when the room cannot be asked."""
    with (
        tempfile.TemporaryDirectory(prefix="wr-gate-nginx-") as rundir,
        running_stack(**ROOM) as stack,
    ):
        room = stack.web_at_public_url(workers=1)
        shop_port = free_port()
        stack.start("shop", [sys.executable, "-m", "tests.echo_shop", str(shop_port)])
        wait_until(lambda: _shop_up(shop_port), timeout=10, what="the sample shop")
        nginx = GateNginx(
            Path(rundir),
            shop=f"127.0.0.1:{shop_port}",
            room=room.removeprefix("http://"),
            unreachable=unreachable,
            fail_open_minutes=fail_open_minutes,
        )
        nginx.start()
        try:
            yield GatedShop(stack=stack, room=room, nginx=nginx)
        except BaseException:
            sys.stderr.write(f"----- nginx log -----\n{nginx.log()[-4000:]}\n")
            raise
        finally:
            nginx.stop()
