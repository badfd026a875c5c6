"""How an :class:`~tether.serve.mcp_server.MCPAgentServer` is reached: stdio, or streamable HTTP.

* **stdio** (:func:`serve_mcp_stdio`): the client starts the process and speaks on its stdin and stdout, which then
  carry nothing else; the server ends when its stdin closes.
* **Streamable HTTP** (:func:`mcp_http_app`, :func:`serve_mcp_http`): one endpoint, ``/mcp``, served by uvicorn.
  It binds 127.0.0.1 unless told otherwise; a host other than a loopback one is refused (``ConfigInvalid``) without a
  token, and with a token every request must carry ``Authorization: Bearer <token>`` (401 otherwise, compared
  in constant time). On 127.0.0.1, localhost or ::1 the SDK's DNS-rebinding protection checks the ``Host``
  and ``Origin`` headers too.

uvicorn and starlette come with the MCP SDK (the ``mcp`` extra); both are imported when a server starts.
"""

from __future__ import annotations

import hmac
import json
import socket
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigInvalid
from tether.serve.security import check_bind

if TYPE_CHECKING:
    from tether.serve.mcp_server import MCPAgentServer

__all__ = ["BearerGate", "mcp_http_app", "serve_mcp_http", "serve_mcp_stdio"]

MCP_PATH = "/mcp"
"""The streamable HTTP endpoint's path."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


async def serve_mcp_stdio(server: MCPAgentServer) -> None:
    """Serve ``server`` on this process's stdin and stdout until stdin closes."""
    from mcp.server.stdio import stdio_server

    lowlevel = server.server
    async with stdio_server() as (read, write):
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


class BearerGate:
    """An ASGI app that lets a request through to ``app`` only with ``Authorization: Bearer <token>``."""

    __slots__ = ("_app", "_expected")

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._allowed(scope):
            await self._app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "message": "a valid 'Authorization: Bearer <token>' is required"})
        headers = [
            (b"content-type", b"application/json"),
            (b"www-authenticate", b'Bearer realm="tether"'),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body.encode()})

    def _allowed(self, scope: Scope) -> bool:
        given = next((value for name, value in scope.get("headers", ()) if name == b"authorization"), b"")
        return hmac.compare_digest(bytes(given), self._expected)


def mcp_http_app(server: MCPAgentServer, *, host: str = "127.0.0.1", token: str | None = None) -> ASGIApp:
    """The streamable HTTP app of ``server`` (``/mcp``), behind a :class:`BearerGate` when ``token`` is given;
    ``ConfigInvalid`` for a host :func:`~tether.serve.security.check_bind` refuses."""
    check_bind(host, token=token)
    app: ASGIApp = server.server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerGate(app, token) if token is not None else app


async def serve_mcp_http(
    server: MCPAgentServer,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``server`` over streamable HTTP on ``host``:``port`` (0: a free port) until cancelled;
    ``on_ready`` gets the endpoint's URL once it listens."""
    import uvicorn

    app = mcp_http_app(server, host=host, token=token)
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host.strip("[]"), port))
    except OSError as error:
        listener.close()
        raise ConfigInvalid(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    listener.listen()
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{listener.getsockname()[1]}{MCP_PATH}"
    http = _server_class()(uvicorn.Config(app, log_level="warning", lifespan="on"))
    http.on_ready = (lambda: on_ready(url)) if on_ready is not None else None
    try:
        await http.serve(sockets=[listener])
    finally:
        listener.close()


def _server_class() -> type[Any]:
    """uvicorn's server, which says when it listens and stops on SIGINT or SIGTERM without raising the signal
    again once stopped (uvicorn's own does, which would end the command by the signal, not with exit 0)."""
    import signal
    import threading
    from contextlib import contextmanager

    import uvicorn

    class Server(uvicorn.Server):
        on_ready: Callable[[], None] | None = None

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.on_ready is not None and not self.should_exit:
                self.on_ready()

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return Server
