"""A loopback HTTP server that answers every request 503 (``Retry-After: 0``, so retries do not wait) and
counts them: how many attempts a provider made is what it was configured to make."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Unavailable:
    base_url: str
    _count: list[int] = field(default_factory=lambda: [0])
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def attempts(self) -> int:
        with self._lock:
            return self._count[0]


@contextmanager
def unavailable_server() -> Iterator[Unavailable]:
    """The server, on 127.0.0.1, for the block."""
    state = Unavailable("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with state._lock:
                state._count[0] += 1
            body = json.dumps({"error": {"message": "overloaded, try again"}}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the signature of the base)
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
