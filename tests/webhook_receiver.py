"""A real HTTP receiver for webhook tests: a server in a thread of the test process that
answers each POST as its script says (an HTTP status, or "hang" to answer too late), and
keeps every request it got; and the receiver's check of a signature, as docs/api.md
("Webhooks") gives it for receivers to copy."""

from __future__ import annotations

import hashlib
import hmac
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int | str


@dataclass
class Receiver:
    url: str
    script: list[int | str]
    hang_seconds: float
    got: list[Received] = field(default_factory=list)


def verify(secret: str, headers: dict[str, str], body: bytes, *, now: float | None = None) -> bool:
    """The docs' verification snippet: the timestamp within 5 minutes, and one of the
    header's ``v1=`` signatures the HMAC-SHA256 of ``"<timestamp>.<body>"``."""
    timestamp = headers["x-waitingroom-webhook-timestamp"]
    if abs((now or time.time()) - int(timestamp)) > 300:
        return False
    expected = hmac.new(
        secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    given = [part.strip()[3:] for part in headers["x-waitingroom-webhook-signature"].split(",")]
    return any(hmac.compare_digest(expected, sig) for sig in given if sig)


@contextmanager
def webhook_receiver(
    script: list[int | str], *, hang_seconds: float = 3.0, tls: tuple[Path, Path] | None = None
) -> Iterator[Receiver]:
    """A receiver at ``Receiver.url`` answering its n-th POST with ``script[n]`` (the last
    item again once the script runs out): a status, or ``"hang"``: nothing for
    ``hang_seconds``, then 200 (after the sender gave up). With ``tls`` (a certificate and
    its key), an https:// receiver at ``localhost``."""
    receiver = Receiver(url="", script=list(script), hang_seconds=hang_seconds)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                n = len(receiver.got)
                answer = receiver.script[min(n, len(receiver.script) - 1)]
                receiver.got.append(
                    Received(
                        path=self.path,
                        headers={k.lower(): v for k, v in self.headers.items()},
                        body=body,
                        answered=answer,
                    )
                )
            if answer == "hang":
                time.sleep(receiver.hang_seconds)
                answer = 200
            try:
                self.send_response(int(answer))
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(f"answer {answer}".encode())
            except OSError:
                pass  # the sender hung up first

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/room"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        receiver.url = f"https://localhost:{server.server_address[1]}/hooks/room"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
