"""A sample shop for the gate's nginx test (tests/test_gate_nginx.py): it answers every GET with
JSON naming the path it was asked for and the cookies it got, so a test can tell what nginx
let through.

    python -m tests.echo_shop PORT
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EchoShop(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # nginx keeps its connections to the shop open

    def do_GET(self) -> None:
        body = json.dumps({"path": self.path, "cookie": self.headers.get("Cookie")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), EchoShop).serve_forever()
