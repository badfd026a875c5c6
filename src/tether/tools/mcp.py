"""Tools from MCP servers: ``async with MCPTools([config, ...]) as mcp: Agent(model, tools=[*mine, *mcp.tools])``.

The contract, before the code:

* **Connecting.** Entering :class:`MCPTools` starts every stdio server (or reaches every streamable-HTTP
  one) at once, completes the MCP handshake and lists each server's tools (``tools/list``, every page). If
  any server fails (command not found, handshake refused, no answer within ``connect_timeout``), the
  servers already started are closed and entering raises: a ``ConfigInvalid`` for a bad configuration
  (a missing ``${VAR}``, a command that is not there), ``TransportError`` or ``TimeoutExceeded`` otherwise.
  The ``mcp`` package is imported here, not before: ``import tether`` and this module stay light.
* **Tools.** Each remote tool becomes a :class:`~tether.tools.base.Tool` built with ``Tool.from_schema``: the
  server's ``inputSchema`` is compiled once per tool and the model's arguments are validated against it
  before the server sees them (bad ones come back to the model as ``invalid_arguments``). A tool whose
  schema does not compile is left out and listed in :attr:`MCPTools.skipped`. Each tool's ``timeout`` is its
  server's ``tool_timeout`` (300 s unless set), which overrides ``Limits.tool_timeout``: a slow server is
  given the time its configuration grants, and a call past it is cancelled on the server
  (``notifications/cancelled``) and answered ``tool_timeout``.
* **Results.** The content blocks in order: text as it is, images and audio as attachments the model sees
  (``messages.Attachment``; a model that cannot read their kind is told so in a line of text), resource links
  as ``[resource link: name <uri>]``, embedded resources as a ``[resource: uri]`` line (followed by their text,
  for text resources; an image, audio or PDF blob is attached). Structured content comes
  first, as JSON, unless a text block already restates it (servers are asked to send both; a one-key
  wrapper such as the Python SDK's ``{"result": x}`` counts as restated by a text block holding x).
  ``isError: true`` raises ``ToolError`` with that text: the model gets a ``tool_failed`` result. A
  protocol error or a lost connection is a ``tool_failed`` too.
* **Names.** A tool keeps its server's name when that is unique across the servers and valid for tether
  (1-64 of ``[A-Za-z0-9_-]``). Only on a clash do the clashing tools of *every* server involved become
  ``<server id>__<name>``; ``prefix=True`` prefixes all of a server's tools always. Characters outside that
  set become ``_``; a name that is still too long, or that two tools still share, is cut and ends with
  ``_`` and eight hex digits of a hash of the server id and the original name, so it stays stable. The
  server is always called with the original name.
* **List changes.** Each server's list is cached and listed again when the server says it changed
  (``notifications/tools/list_changed``; on 2026-07-28 connections through ``subscriptions/listen``), or
  on :meth:`MCPTools.refresh`. :attr:`MCPTools.tools` always reflects the current lists (an unchanged tool
  stays the same ``Tool`` object, so its schema is not compiled again); :attr:`MCPTools.generation` counts
  changes and :meth:`MCPTools.changed` waits for the next one. An ``Agent`` keeps the tools it was built
  with: build the next agent (or run) from ``mcp.tools`` to offer the new list. A ``Tool`` handed out
  earlier still calls its server by its original name; a tool the server dropped answers ``tool_failed``.
* **Closing.** Leaving the block (normally, by an exception or by cancellation) closes every connection:
  the SDK closes a stdio server's stdin, waits two seconds, then SIGTERMs and SIGKILLs its process group.
  Each server's connection lives in a task of its own that closing awaits under ``asyncio.shield``, so a
  cancelled (even twice) ``async with`` does not cut the shutdown short. When the host process itself dies,
  SIGKILL included, ``mcp_guard.py`` (which every stdio server is started through, on POSIX) takes the
  server down; see its docstring for what it guarantees. HTTP servers are not ours: only the session is
  closed (``DELETE``). Calls after closing answer ``tool_failed``.
* **A server that dies.** When a server closes the connection inside the block (a stdio server that crashed
  or was killed), the call that finds out answers ``tool_failed`` and is not sent again (the server may have
  acted on it); the next call starts the server again, lists its tools afresh and is served. A server that
  cannot be started fails that call, and the next call tries again.
* **Environment.** A stdio server gets the SDK's safe subset of the host's environment (``HOME``,
  ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``) plus ``env``; ``${VAR}`` in ``env`` values and in
  ``headers`` values is replaced from the host's environment when connecting, and a variable that is not
  set is a ``ConfigInvalid`` naming the server, the key and the variable.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tether._logging import get_logger
from tether.errors import ConfigInvalid
from tether.messages import Attachment
from tether.tools.base import Tool
from tether.tools.mcp_spec import MCPServerConfig, duplicate_ids

if TYPE_CHECKING:
    from types import TracebackType

    from mcp.types import Tool as RemoteTool

    from tether.tools.mcp_connection import Connection

__all__ = ["MCPServerConfig", "MCPTools", "exposed_names"]

log = get_logger("tether.mcp")

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64
SEPARATOR = "__"


class MCPTools:
    """The tools of some MCP servers, connected for the life of an ``async with`` block (module docstring)."""

    def __init__(self, servers: Iterable[MCPServerConfig]) -> None:
        self.configs = tuple(servers)
        if doubles := duplicate_ids(config.id for config in self.configs):
            raise ConfigInvalid(f"MCP server ids must be unique: servers[{doubles[0][0]}]: {doubles[0][1]}")
        self._connections: list[Connection] = []
        self._tools: tuple[Tool, ...] = ()
        self._built: dict[tuple[str, ...], Tool] = {}
        self._skipped: dict[str, str] = {}
        self._generation = 0
        self._change = asyncio.Event()
        self._entered = False

    # --- the block ------------------------------------------------------------------------------------------

    async def __aenter__(self) -> MCPTools:
        if self._entered:
            raise RuntimeError("MCPTools can be entered once; make a new one to connect again")
        self._entered = True
        try:
            import mcp.client.client  # noqa: F401 - fail early and clearly when the extra is missing
        except ImportError:
            raise ConfigInvalid("MCP servers need the 'mcp' package: pip install 'tether[mcp]'") from None
        from tether.tools.mcp_connection import Connection

        self._connections = [Connection(config, self._rebuild) for config in self.configs]
        outcomes = await asyncio.gather(*(c.open() for c in self._connections), return_exceptions=True)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failures:
            await self.aclose()
            for failure in failures[1:]:
                log.warning("another MCP server failed to connect too: %s", failure)
            raise failures[0]
        self._rebuild()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection and stop every stdio server (what leaving the block does)."""
        connections, self._connections = self._connections, []
        if connections:
            closing = asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
            await asyncio.shield(closing)
        self._rebuild()

    # --- the tools ------------------------------------------------------------------------------------------

    @property
    def tools(self) -> list[Tool]:
        """The servers' tools as they are now, servers in the order given, each server's in its order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool named ``name`` (its tether name), if a server offers it now."""
        return next((tool for tool in self._tools if tool.name == name), None)

    @property
    def skipped(self) -> dict[str, str]:
        """Tools left out, ``"server/tool"`` -> why (a schema that does not compile)."""
        return dict(self._skipped)

    @property
    def generation(self) -> int:
        """How many times :attr:`tools` has changed since entering."""
        return self._generation

    async def changed(self, since: int) -> int:
        """Wait until :attr:`generation` is past ``since``; returns the new generation."""
        while self._generation <= since:
            await self._change.wait()
        return self._generation

    async def refresh(self) -> None:
        """List every server's tools again now (servers that announce changes need not be asked)."""
        await asyncio.gather(*(connection.refresh() for connection in self._connections))

    def _rebuild(self) -> None:
        """Recompute the tools from every server's current list; reuses the Tool of an unchanged tool."""
        listed = [(c, remote) for c in self._connections for remote in c.listing]
        names = exposed_names([(c.config.id, c.config.prefix, remote.name) for c, remote in listed])
        built: dict[tuple[str, ...], Tool] = {}
        skipped: dict[str, str] = {}
        tools: list[Tool] = []
        for (connection, remote), name in zip(listed, names, strict=True):
            key = _key(connection.config.id, remote, name)
            tool = built.get(key) or self._built.get(key)
            if tool is None:
                try:
                    tool = _make_tool(connection, remote, name)
                except ConfigInvalid as exc:
                    skipped[f"{connection.config.id}/{remote.name}"] = exc.message
                    log.warning("MCP server %r: tool %r left out: %s", connection.config.id, remote.name, exc.message)
                    continue
            built[key] = tool
            tools.append(tool)
        self._built, self._skipped = built, skipped
        if [id(tool) for tool in tools] != [id(tool) for tool in self._tools]:
            self._tools = tuple(tools)
            self._generation += 1
            change, self._change = self._change, asyncio.Event()
            change.set()


def _key(server: str, remote: RemoteTool, name: str) -> tuple[str, ...]:
    schema = json.dumps(remote.input_schema, sort_keys=True, default=str)
    return (server, remote.name, name, _description(remote), schema, str(_read_only(remote)))


def _read_only(remote: RemoteTool) -> bool:
    """The server says the tool only reads (``annotations.readOnlyHint``): offered in read-only mode."""
    return bool(remote.annotations is not None and remote.annotations.read_only_hint)


def _description(remote: RemoteTool) -> str:
    return remote.description or remote.title or ""


def _make_tool(connection: Connection, remote: RemoteTool, name: str) -> Tool:
    remote_name = remote.name

    async def call(arguments: dict[str, Any]) -> str | list[str | Attachment]:
        return await connection.call(remote_name, arguments)

    return Tool.from_schema(
        name,
        _description(remote),
        remote.input_schema,
        call,
        timeout=connection.config.tool_timeout,
        read_only=_read_only(remote),
        server=connection,
    )


# --- names --------------------------------------------------------------------------------------------------


def exposed_names(tools: Sequence[tuple[str, bool, str]]) -> list[str]:
    """The tether name of each ``(server id, always prefix, remote name)``, in order (see "Names" above)."""
    bases = [_sanitize(remote) for _, _, remote in tools]
    servers_of: dict[str, set[str]] = {}
    for (server, _, _), base in zip(tools, bases, strict=True):
        servers_of.setdefault(base, set()).add(server)
    names = []
    for (server, always, remote), base in zip(tools, bases, strict=True):
        name = f"{server}{SEPARATOR}{base}" if always or len(servers_of[base]) > 1 else base
        names.append(name if len(name) <= MAX_NAME else _hashed(name, server, remote))
    counts = Counter(names)
    seen: set[str] = set()
    for index, ((server, _, remote), name) in enumerate(zip(tools, names, strict=True)):
        if counts[name] > 1 and name in seen:
            names[index] = _hashed(name, server, remote)
        seen.add(name)
    return names


def _sanitize(remote: str) -> str:
    return _INVALID.sub("_", remote) or "_"


def _hashed(name: str, server: str, remote: str) -> str:
    digest = hashlib.sha256(f"{server}\0{remote}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"
