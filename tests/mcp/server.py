"""A small MCP server for the tests, written with the SDK's server API (``MCPServer``).

Run ``python server.py stdio`` or ``python server.py http`` (binds 127.0.0.1 on a free port and prints
``PORT <n>`` on stdout once it listens). ``stdio --legacy`` serves the pre-2026 handshake era only, so
clients fall back to it and get change notifications unasked. With ``MCP_TEST_ONCE`` set to a path, a
second start fails (see ``refuse_to_start_twice``). With ``MCP_TEST_LOG`` set, every request
the server receives is appended to that file as one JSON line (``{"method": ..., "params": ...}``), and
tools write their own markers there.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

LOG = os.environ.get("MCP_TEST_LOG")
LEGACY = "--legacy" in sys.argv


def record(entry: dict[str, Any]) -> None:
    if LOG:
        with open(LOG, "a") as file:
            file.write(json.dumps(entry, default=str) + "\n")


async def log_requests(ctx: Any, call_next: Any) -> Any:
    record({"method": ctx.method, "params": ctx.params})
    return await call_next(ctx)


server: MCPServer[Any] = MCPServer("tether-test", middleware=[log_requests])
events: dict[str, anyio.Event] = {}


def released() -> anyio.Event:
    """Made on first use, inside the server's event loop."""
    return events.setdefault("released", anyio.Event())


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(message: str) -> str:
    """Say the message back."""
    return message


@server.tool(name="get.env")
def get_env(name: str) -> str:
    """The value of an environment variable of the server."""
    return os.environ.get(name, "<unset>")


@server.tool()
def pids() -> dict[str, int]:
    """The server's pid and its parent's."""
    return {"pid": os.getpid(), "ppid": os.getppid()}


@server.tool()
def fail(message: str) -> str:
    """Always fails with the message."""
    raise ToolError(message)


@server.tool()
async def wait_for_release() -> str:
    """Wait until release is called."""
    record({"marker": "waiting"})
    try:
        await released().wait()
    except anyio.get_cancelled_exc_class():
        record({"marker": "wait cancelled"})
        raise
    return "released"


@server.tool()
async def release() -> str:
    """Let wait_for_release return."""
    released().set()
    return "ok"


@server.tool()
def forecast() -> CallToolResult:
    """Structured content and no text."""
    return CallToolResult(content=[], structured_content={"city": "Oslo", "celsius": -3})


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of an HTTP header of this request."""
    return (ctx.headers or {}).get(name.lower(), "<none>")


@server.tool()
async def stuck() -> str:
    """Block the server's event loop for good: it reads nothing more, not even the end of its stdin."""
    record({"marker": "stuck"})
    threading.Event().wait()
    return "never"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool 'fresh' and tell the client the tool list changed."""

    def fresh() -> str:
        """A tool that appeared later."""
        return "fresh"

    server.add_tool(fresh, name="fresh")
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return "grown"


def serve_http() -> None:
    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    http = uvicorn.Server(config)

    original_startup = http.startup

    async def startup(sockets: list[socket.socket] | None = None) -> None:
        await original_startup(sockets)
        print(f"PORT {listener.getsockname()[1]}", flush=True)

    http.startup = startup  # type: ignore[method-assign]
    http.run(sockets=[listener])


async def serve_legacy_stdio() -> None:
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        options = lowlevel.create_initialization_options()
        await serve_loop(lowlevel, read, write, lifespan_state=state, init_options=options)


def refuse_to_start_twice() -> None:
    """With ``MCP_TEST_ONCE`` set to a path: the first start creates that file, a start that finds it fails."""
    marker = os.environ.get("MCP_TEST_ONCE")
    if marker and os.path.exists(marker):
        sys.exit("started once already")
    if marker:
        open(marker, "w").close()


if __name__ == "__main__":
    refuse_to_start_twice()
    if sys.argv[1] == "http":
        serve_http()
    elif LEGACY:
        anyio.run(serve_legacy_stdio)
    else:
        server.run("stdio")
