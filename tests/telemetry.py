"""Stand-ins for where the room's telemetry goes, run by the tests: an OpenTelemetry
collector's OTLP/HTTP traces endpoint (decoded with opentelemetry-proto) and Sentry's
envelope ingestion. Each is a real HTTP server on loopback, in a thread of the test."""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    scope: str  # the instrumentation's name: opentelemetry.instrumentation.django, ...
    service: str  # the resource's wr.process: web, worker, beat
    attributes: dict[str, Any]


@dataclass
class Received:
    spans: list[Span] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # Sentry's event items
    paths: list[str] = field(default_factory=list)  # every request's path, in order
    lock: threading.Lock = field(default_factory=threading.Lock)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def _spans(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    Span(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        name=span.name,
                        scope=scope_spans.scope.name,
                        service=str(resource.get("wr.process", "")),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                    )
                )
    return spans


def _decoded(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


def _sentry_events(envelope: bytes) -> list[dict[str, Any]]:
    """The ``event`` items of a Sentry envelope (a header line, then header and payload per
    item)."""
    lines = envelope.split(b"\n")
    events = []
    index = 1
    while index < len(lines):
        if not lines[index].strip():
            index += 1
            continue
        header = json.loads(lines[index])
        length = header.get("length")
        if length is not None:
            rest = b"\n".join(lines[index + 1 :])
            payload, remaining = rest[:length], rest[length + 1 :]
            lines = [b"", *remaining.split(b"\n")]
            index = 1
        else:
            payload = lines[index + 1] if index + 1 < len(lines) else b""
            index += 2
        if header.get("type") == "event":
            events.append(json.loads(payload))
    return events


def _handler(received: Received) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = _decoded(body, self.headers.get("Content-Encoding", ""))
            with received.lock:
                received.paths.append(self.path)
            if self.path == "/v1/traces":
                with received.lock:
                    received.spans.extend(_spans(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                content_type = "application/x-protobuf"
            else:  # /api/<project>/envelope/
                with received.lock:
                    received.events.extend(_sentry_events(body))
                answer, content_type = b"{}", "application/json"
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def telemetry_sink() -> Iterator[tuple[str, Received]]:
    """A local OTLP/HTTP collector and Sentry ingestion; its base URL and what it got."""
    received = Received()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(received))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
