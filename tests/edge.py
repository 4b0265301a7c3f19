"""nginx in front of a test's web processes, the production way: deploy/nginx's template
rendered and run by deploy/nginx/run.sh, on loopback ports, with TLS under a certificate made here;
and a browser-like HTTPS client that can come from any loopback address (127.0.0.0/8)."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import urllib.parse
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.conf import settings

from tests.http import Reply
from tests.processes import ROOT, free_port, wait_until

TEMPLATE = ROOT / "deploy" / "nginx" / "nginx.conf.template"
RUN = ROOT / "deploy" / "nginx" / "run.sh"  # what docker-compose.yml's nginx service runs
PAGES = ROOT / "deploy" / "nginx" / "pages"

# The room's settings behind nginx, production's (docker-compose.yml; tests/test_deploy.py
# compares): DEBUG off, HTTPS only, one trusted proxy, static files left to nginx.
PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "edge-test-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    # The test process's own: pass-signing keys one of them sealed, the other opens.
    "WR_PASS_KEY_ENCRYPTION_KEY": ",".join(settings.WR_PASS_KEY_ENCRYPTION_KEYS),
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    "DJANGO_BEHIND_TLS_PROXY": "1",
    "WR_TRUSTED_PROXY_COUNT": "1",
    "WR_SERVE_STATIC": "0",
    "WR_JOIN_LIMIT_PER_IP": "3",
}


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None


# The mark of the tests that run Debian's nginx.
needs_nginx = pytest.mark.skipif(
    nginx_binary() is None,
    reason="nginx is not installed: scripts/ensure_nginx.sh installs Debian's package "
    "(make test runs it)",
)


def readable_dir(path: Path) -> Path:
    """nginx's workers run as www-data: they must reach what they serve and write to."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost; the client trusts exactly this one."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def readable_copy(source: Path, target: Path) -> Path:
    """``source``'s files in ``target``, which nginx's workers can read wherever ``source``
    sits: a checkout in a home directory (mode 0700) is closed to www-data."""
    readable_dir(target)
    for item in source.iterdir():
        if item.is_file():
            copied = target / item.name
            shutil.copyfile(item, copied)
            copied.chmod(0o644)
    return target


class Nginx:
    def __init__(
        self, rundir: Path, *, web_servers: list[str], static_root: Path, pages: Path = PAGES
    ) -> None:
        self.rundir = readable_dir(rundir)
        self.https_port = free_port()
        self.http_port = free_port()
        self.base_url = f"https://127.0.0.1:{self.https_port}"
        cert, key = self_signed_certificate(self.rundir)
        self.tls = ssl.create_default_context(cafile=str(cert))
        # The same variables docker-compose.yml gives the nginx service.
        self.env = {
            "NGINX_RUN_DIR": str(self.rundir),
            "NGINX_HTTP_LISTEN": f"127.0.0.1:{self.http_port}",
            "NGINX_HTTPS_LISTEN": f"127.0.0.1:{self.https_port}",
            "NGINX_TLS_CERT": str(cert),
            "NGINX_TLS_KEY": str(key),
            "NGINX_WEB_SERVERS": " ".join(web_servers),
            "NGINX_STATIC_ROOT": str(static_root),
            "NGINX_PAGES_ROOT": str(readable_copy(pages, self.rundir / "pages")),
            "WR_PUBLIC_URL": self.base_url,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.rundir / "nginx.log", "ab")
        tools = {"PYTHON": sys.executable, "NGINX": nginx_binary() or "nginx"}
        self.proc = subprocess.Popen(
            [str(RUN)],
            env={**os.environ, **self.env, **tools},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_until(self._answers, timeout=15, what="nginx")

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"nginx exited:\n{self.log()}")
        try:
            with socket.create_connection(("127.0.0.1", self.https_port), timeout=0.5):
                return True
        except OSError:
            return False

    def log(self) -> str:
        path = self.rundir / "nginx.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Browser:
    """Cookies kept like a browser's (one jar per fan), from one loopback source address."""

    def __init__(self, base_url: str, tls: ssl.SSLContext, source: str = "127.0.0.1") -> None:
        self.base = urllib.parse.urlsplit(base_url)
        self.tls = tls
        self.source = source
        self.cookies: dict[str, str] = {}
        self.set_cookie_lines: list[str] = []

    @property
    def origin(self) -> str:
        return f"{self.base.scheme}://{self.base.netloc}"

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        sent = dict(headers or {})
        data = None
        if json_body is not None:
            data = json.dumps(json_body).encode()
            sent["Content-Type"] = "application/json"
        elif form is not None:
            data = urllib.parse.urlencode(form).encode()
            sent["Content-Type"] = "application/x-www-form-urlencoded"
            sent.setdefault("Origin", self.origin)
            sent.setdefault("Referer", f"{self.origin}{path}")
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn = http.client.HTTPSConnection(
            self.base.hostname,
            self.base.port,
            context=self.tls,
            timeout=30,
            source_address=(self.source, 0),
        )
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            raw = response.read()
            set_cookies = response.headers.get_all("Set-Cookie") or []
            headers_seen = {k.lower(): v for k, v in response.getheaders()}
            if set_cookies:
                headers_seen["set-cookie"] = "\n".join(set_cookies)
            status = response.status
        finally:
            conn.close()
        self.set_cookie_lines += set_cookies
        for line in set_cookies:
            for name, morsel in SimpleCookie(line).items():
                if morsel["max-age"] == "0":
                    self.cookies.pop(name, None)
                else:
                    self.cookies[name] = morsel.value
        text = raw.decode(errors="replace")
        try:
            body = json.loads(text) if text else None
        except ValueError:
            body = text
        return Reply(status=status, headers=headers_seen, body=body)
