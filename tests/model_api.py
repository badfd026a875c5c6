"""A model API on a loopback port for the health checks: it lists models, refuses a key, or never answers.

It records every request (method, path, the key it carried), so a test can see that a check spent no token:
a health check only ever sends ``GET .../models``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

Behaviour = Literal["models", "refuse", "hang"]


@dataclass
class ModelApi:
    """The server's address and what it saw."""

    url: str
    """Its base URL, ending in ``/v1``."""
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    """``(method, path, Authorization header)`` of every request, in order."""
    release: threading.Event = field(default_factory=threading.Event)
    """Set when the server closes: a hanging request then ends."""


@contextmanager
def model_api(behaviour: Behaviour, models: tuple[str, ...] = ("small-model", "big-model")) -> Iterator[ModelApi]:
    """A server that answers ``GET /v1/models`` as ``behaviour`` says: the models listed, HTTP 401 quoting the
    key it was given (as some proxies do), or no answer at all until the block ends."""
    api = ModelApi("")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            key = self.headers.get("Authorization", "")
            api.requests.append((self.command, self.path, key))
            if behaviour == "hang":
                api.release.wait(60)
                return
            payload: dict[str, object]
            if behaviour == "refuse":
                quoted = key.removeprefix("Bearer ")
                status, payload = 401, {"error": {"message": f"Incorrect API key provided: {quoted}"}}
            else:
                status, payload = 200, {"object": "list", "data": [{"id": name} for name in models]}
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, fmt: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield api
    finally:
        api.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def closed_port() -> Iterator[str]:
    """The base URL of a loopback port that is bound but not listening: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
