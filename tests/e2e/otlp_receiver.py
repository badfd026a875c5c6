"""An OTLP/HTTP receiver on 127.0.0.1: it decodes the protobuf requests the SDK's exporters send and keeps
what they carry, for tests of the command's export (``tether/cli/otlp.py``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Received:
    """What the receiver got: the decoded span exports, and the path of every request."""

    traces: list[ExportTraceServiceRequest] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def endpoint(self) -> str:
        """The value of ``OTEL_EXPORTER_OTLP_ENDPOINT`` that points here."""
        return f"http://127.0.0.1:{self.port}"

    def spans(self) -> list[tuple[str, str]]:
        """``(span name, service.name)`` of every span received, in order."""
        found = []
        for request in self.traces:
            for resource_spans in request.resource_spans:
                attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    found += [(span.name, attributes.get("service.name", "")) for span in scope_spans.spans]
        return found


@contextmanager
def otlp_receiver() -> Iterator[Received]:
    """A receiver answering every export with success, for as long as the block runs."""
    received = Received()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                received.paths.append(self.path)
                if self.path == "/v1/traces":
                    received.traces.append(ExportTraceServiceRequest.FromString(body))
            answer = ExportTraceServiceResponse().SerializeToString() if self.path == "/v1/traces" else b""
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
            """Quiet: the test reads what was received, not a log of it."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)
