"""One MCP server: connect, list its tools, call them, follow its list changes, close. Internal to ``mcp.py``.

Each server lives in an asyncio task of its own, which enters the SDK's ``mcp.Client`` and exits it: the
SDK's anyio scopes must be left by the task that entered them, and a task of our own cannot be cancelled by
the host's cancellation. Closing sets an event and awaits that task under ``asyncio.shield``, so a
cancellation (even a repeated one) of whoever closes cannot cut the server's shutdown short: it finishes
in the background while the event loop runs. The SDK's shutdown closes the server's stdin, waits two
seconds, then SIGTERMs and SIGKILLs its process group; ``mcp_guard.py`` covers the host's own death.

Calls may come from any task: the SDK multiplexes requests over the one connection.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether._logging import get_logger
from tether.errors import ConfigInvalid, TetherError, TimeoutExceeded, ToolError, ToolTimeout, TransportError
from tether.messages import Attachment
from tether.telemetry.spans import child_span, tracing

if TYPE_CHECKING:
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.types import CallToolResult, ContentBlock
    from mcp.types import Tool as RemoteTool

    from tether.tools.mcp_spec import MCPServerConfig

__all__ = ["Connection", "expand", "render_result"]

log = get_logger("tether.mcp")

GUARD = str(Path(__file__).with_name("mcp_guard.py"))
MAX_LIST_PAGES = 100
"""``tools/list`` pages read at most; a server that pages forever cannot hang a listing."""
HTTP_READ_TIMEOUT = 300.0
"""Seconds an HTTP response stream may stay silent (at least; a longer tool timeout raises it)."""

_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Connection:
    """One server's connection, held by a task of its own (see the module docstring)."""

    def __init__(self, config: MCPServerConfig, on_change: Callable[[], None]) -> None:
        self.config = config
        self.listing: tuple[RemoteTool, ...] = ()
        """The server's tools as it last listed them."""
        self._on_change = on_change
        self._client: Client | None = None
        self._stop = asyncio.Event()
        self._stale = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        """Set by :meth:`close`: the connection is over for good and is never started again."""
        self._lost = False
        """A call found the connection closed by the server: the next call starts it again."""
        self._restarting = asyncio.Lock()

    # --- lifetime -------------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Start or reach the server, handshake and list its tools; raises a TetherError if any of it fails."""
        self._stop = asyncio.Event()
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready), name=f"tether-mcp-{self.config.id}")
        try:
            await asyncio.shield(ready)
        except asyncio.CancelledError:
            await self._end(abort=True)
            raise

    async def close(self, *, abort: bool = False) -> None:
        """Close the connection for good and stop the server; ``abort`` also cuts a connection being made."""
        self._closed = True
        await self._end(abort=abort)

    async def _end(self, *, abort: bool = False) -> None:
        """Close the current connection (the held task ends, the SDK stops the server)."""
        self._stop.set()
        task = self._task
        if task is None:
            return
        if abort and self._client is None:
            task.cancel()
        await asyncio.shield(task)

    def _needs_restart(self) -> bool:
        ended = self._task is not None and self._task.done()
        return not self._closed and (self._lost or ended)

    async def _restart(self) -> None:
        """Start the server again after it closed the connection; one restart however many calls wait for it."""
        async with self._restarting:
            if not self._needs_restart():
                return
            server = self.config.id
            log.warning("MCP server %r closed the connection; starting it again", server)
            await self._end()
            if self._closed:
                return
            before = self.listing
            try:
                await self.open()
            except TetherError as exc:
                raise ToolError(f"MCP server {server!r} closed the connection and could not be started again: "
                                f"{exc.message}") from None  # fmt: skip
            self._lost = False
            if self.listing != before:
                self._on_change()

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout(self.config.connect_timeout):
                        client = await stack.enter_async_context(await self._make_client(stack))
                        self.listing = await _list(client, self._span_attributes(client) if tracing() else {})
                except asyncio.CancelledError:
                    ready.cancel()
                    raise
                except Exception as exc:  # noqa: BLE001 - every failure is the caller's to see
                    ready.set_exception(self._connect_error(exc))
                    return
                self._client = client
                ready.set_result(None)
                await self._serve(client)
        except Exception:  # a server that dies badly must not take the host with it
            log.warning("MCP server %r did not close cleanly", self.config.id, exc_info=True)
        finally:
            self._client = None
            if not ready.done():
                ready.set_exception(TransportError(f"MCP server {self.config.id!r}: the connection was closed"))

    async def _serve(self, client: Client) -> None:
        """Follow the server's tool list until told to stop."""
        from mcp.types.version import MODERN_PROTOCOL_VERSIONS

        watchers = [asyncio.create_task(self._refresh_when_stale(client))]
        capability = client.server_capabilities.tools
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS and capability and capability.list_changed:
            # Since 2026-07-28 a client opts in to change notifications; before, servers send them unasked.
            watchers.append(asyncio.create_task(self._listen(client)))
        try:
            await self._stop.wait()
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def _listen(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                # A change between the first listing and this acknowledgment sent no event: list once more.
                self._stale.set()
                async for _event in subscription:
                    self._stale.set()
        except Exception as exc:  # noqa: BLE001 - the tool list simply stops following the server
            log.info("MCP server %r: no more tool list changes: %s", self.config.id, exc)

    async def _on_message(self, message: Any) -> None:
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._stale.set()

    async def _refresh_when_stale(self, client: Client) -> None:
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                await self._relist(client)
            except Exception as exc:  # noqa: BLE001 - keep the old list; the next change may fare better
                log.warning("MCP server %r: could not refresh its tool list: %s", self.config.id, exc)

    async def refresh(self) -> None:
        """List the server's tools again now."""
        if self._client is not None:
            await self._relist(self._client)

    async def _relist(self, client: Client) -> None:
        async with asyncio.timeout(self.config.connect_timeout):
            listing = await _list(client, self._span_attributes(client) if tracing() else {})
        if listing != self.listing:
            self.listing = listing
            self._on_change()

    # --- health -------------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The server's id (``ToolServer.name``)."""
        return self.config.id

    async def check(self) -> str:
        """Whether the server is up now (``ToolServer.check``, for ``Agent.health()``): it is asked for its tool
        list, a real ``tools/list`` (a changed list is taken, as a notification would have it). A server that
        closed the connection is reported, not started again: the next call does that. Raises
        ``TransportError`` (``TimeoutExceeded`` past ``connect_timeout``) saying why it is not up."""
        server = self.config.id
        client = self._client
        if self._closed:
            raise TransportError(f"MCP server {server!r} is closed: its MCPTools block was left")
        if client is None or self._needs_restart():
            raise TransportError(f"MCP server {server!r} closed the connection; the next call starts it again")
        try:
            await self._relist(client)
        except TimeoutError:
            raise TimeoutExceeded(
                f"MCP server {server!r} did not list its tools within {self.config.connect_timeout:g} s",
                details={"deadline": "mcp_connect", "server": server},
            ) from None
        except Exception as exc:  # noqa: BLE001 - whatever it was, the server is not up
            from mcp.shared.exceptions import MCPError
            from mcp.types import CONNECTION_CLOSED

            if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED and client is self._client:
                self._lost = True  # as a call that found it closed: the next call starts it again
            raise TransportError(f"MCP server {server!r} did not list its tools: {_describe(_leaf(exc))}") from None
        count = len(self.listing)
        return f"{count} tool{'s' if count != 1 else ''} listed"

    # --- calls ----------------------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> str | list[str | Attachment]:
        """Call tool ``name``; its result as the text the model reads, with its attachments when it has any.
        Failures raise ``ToolError``s."""
        server = self.config.id
        if self._needs_restart():
            await self._restart()
        client = self._client
        if client is None:
            raise ToolError(f"MCP server {server!r} is not connected")
        attributes: dict[str, Any] = {"mcp.method.name": "tools/call", "gen_ai.tool.name": name}
        attributes["gen_ai.operation.name"] = "execute_tool"
        if tracing():
            attributes.update(self._span_attributes(client))
        with child_span(f"tools/call {name}", attributes) as span:
            result = await self._call(client, name, arguments, span)
            if result.is_error and span is not None:
                span.set_attribute("error.type", "tool_error")
            return render_result(result)

    async def _call(self, client: Client, name: str, arguments: dict[str, Any], span: Any) -> CallToolResult:
        """``tools/call``, its failures turned into ``ToolError``s (and ``error.type`` on ``span``, if any)."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        server = self.config.id
        # The SDK tells the server of a call it gives up (``notifications/cancelled``) as it unwinds its first
        # cancellation; a second one (this deadline and the loop's, equal for an MCP tool, fire one after the
        # other) would cut that message short. So the call is a task of its own, cancelled exactly once.
        call = asyncio.ensure_future(client.call_tool(name, arguments))
        call.add_done_callback(_retrieved)
        try:
            async with asyncio.timeout(self.config.tool_timeout) as scope:
                return await asyncio.shield(call)
        except TimeoutError:
            if span is not None:
                span.set_attribute("error.type", "timeout")
            if not scope.expired():
                raise ToolError(f"MCP server {server!r}: the call to {name!r} timed out") from None
            raise ToolTimeout(
                f"MCP tool {name!r} (server {server!r}) did not finish within {self.config.tool_timeout:g} s "
                "and was cancelled"
            ) from None
        except MCPError as exc:
            if span is not None:
                span.set_attributes({"error.type": str(exc.code), "rpc.response.status_code": str(exc.code)})
            if exc.code == CONNECTION_CLOSED:
                # Not retried: the server may have acted on the call before it went. The next call restarts it
                # (unless this connection was already replaced or closed for good).
                if client is self._client and not self._closed:
                    self._lost = True
                    raise ToolError(f"MCP server {server!r} closed the connection; it is started again for the "
                                    "next call") from None  # fmt: skip
                raise ToolError(f"MCP server {server!r} closed the connection") from None
            raise ToolError(f"MCP server {server!r} refused the call to {name!r}: {exc.message}") from None
        except Exception as exc:  # whatever went wrong, the model gets a plain message
            raise ToolError(f"MCP server {server!r}: the call to {name!r} failed: {_describe(exc)}") from exc
        finally:
            call.cancel()  # a no-op once it ended

    def _span_attributes(self, client: Client | None) -> dict[str, Any]:
        """What the MCP conventions put on every client span of this connection."""
        config = self.config
        attributes: dict[str, Any] = {"network.transport": "pipe" if config.transport == "stdio" else "tcp"}
        if config.transport == "http" and config.url is not None:
            from urllib.parse import urlsplit

            url = urlsplit(config.url)
            attributes["network.protocol.name"] = "http"
            if url.hostname:
                attributes["server.address"] = url.hostname
                attributes["server.port"] = url.port or (443 if url.scheme == "https" else 80)
        if client is not None:
            with contextlib.suppress(Exception):  # not connected yet: no version to report
                attributes["mcp.protocol.version"] = client.protocol_version
        return attributes

    # --- connecting -----------------------------------------------------------------------------------------

    async def _make_client(self, stack: contextlib.AsyncExitStack) -> Client:
        from mcp.client.client import Client
        from mcp.types import Implementation

        from tether._version import __version__

        info = Implementation(name="tether", version=__version__)
        config = self.config
        if config.transport == "stdio":
            return Client(self._stdio(), cache=None, message_handler=self._on_message, client_info=info)
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        assert config.url is not None
        headers = {
            key: expand(value, f"MCP server {config.id!r}: header {key!r}") for key, value in config.headers.items()
        }
        read = max(HTTP_READ_TIMEOUT, config.tool_timeout + 30.0)
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=read))
        )
        transport = streamable_http_client(config.url, http_client=http)
        return Client(transport, cache=None, message_handler=self._on_message, client_info=info)

    def _stdio(self) -> StdioServerParameters:
        from mcp.client.stdio import StdioServerParameters

        config = self.config
        assert config.command is not None
        env = {key: expand(value, f"MCP server {config.id!r}: env {key!r}") for key, value in config.env.items()}
        cwd = None if config.cwd is None else str(config.cwd)
        command = self._resolve(config.command, env, cwd)
        if sys.platform == "win32":  # pragma: no cover - the SDK puts the server in a Job Object
            return StdioServerParameters(command=command, args=list(config.args), env=env, cwd=cwd)
        args = ["-I", "-S", GUARD, str(os.getpid()), "--", command, *config.args]
        return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=cwd)

    def _resolve(self, command: str, env: dict[str, str], cwd: str | None) -> str:
        """The server's executable, found as the OS would find it; a clear error when it is not there."""
        if os.sep in command or (os.altsep is not None and os.altsep in command):
            path = Path(cwd or ".", command)
            if path.is_file() and os.access(path, os.X_OK):
                return str(path.absolute())
            raise ConfigInvalid(f"MCP server {self.config.id!r}: {command!r} is not an executable file")
        found = shutil.which(command, path=env.get("PATH", os.environ.get("PATH", os.defpath)))
        if found is None:
            raise ConfigInvalid(f"MCP server {self.config.id!r}: command {command!r} was not found on PATH")
        return found

    def _connect_error(self, exc: BaseException) -> BaseException:
        """What a failed connection raises: a TetherError that says which server and why."""
        config = self.config
        exc = _leaf(exc)
        if isinstance(exc, TetherError | asyncio.CancelledError):
            return exc
        if isinstance(exc, TimeoutError):
            return TimeoutExceeded(
                f"MCP server {config.id!r} did not answer within {config.connect_timeout:g} s",
                details={"deadline": "mcp_connect", "server": config.id},
            )
        where = config.url if config.transport == "http" else config.command
        message = f"MCP server {config.id!r} ({where}) could not be reached: {_describe(exc)}"
        if config.transport == "stdio":
            message += " (its stderr may say why)"
        error = TransportError(message, details={"server": config.id})
        error.__cause__ = exc
        return error


async def _list(client: Client, attributes: dict[str, Any]) -> tuple[RemoteTool, ...]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    with child_span("tools/list", {"mcp.method.name": "tools/list", **attributes}):
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
    return tuple(tools)


def expand(value: str, where: str) -> str:
    """``value`` with each ``${VAR}`` replaced from the process environment; a missing variable is an error."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if not _NAME.fullmatch(name):
            raise ConfigInvalid(f"{where}: ${{{name}}} is not a valid environment variable reference")
        if name not in os.environ:
            raise ConfigInvalid(f"{where} uses ${{{name}}}, but {name} is not set in the environment")
        return os.environ[name]

    return _VARIABLE.sub(replace, value)


# --- results ------------------------------------------------------------------------------------------------


def render_result(result: CallToolResult) -> str | list[str | Attachment]:
    """A ``tools/call`` result as the text the model reads, and its attachments; ``isError`` raises ``ToolError``
    with its text.

    The content blocks in order: text as it is, images and audio (and image, audio or PDF blobs of embedded
    resources) as attachments, other resources as short notes. Structured content comes first as JSON, unless a
    text block already restates it (servers are asked to send both). Without attachments, the text alone.
    """
    structured = result.structured_content
    parts: list[str | Attachment] = [block.text if block.type == "text" else _part(block) for block in result.content]
    if structured is not None and not any(
        block.type == "text" and _repeats(block.text, structured) for block in result.content
    ):
        parts.insert(0, json.dumps(structured, ensure_ascii=False))
    texts = [part for part in parts if isinstance(part, str)]
    if result.is_error:
        raise ToolError("\n".join(texts) or "The tool reported an error without a message.")
    if len(texts) < len(parts):
        return parts
    return "\n".join(texts) or "(no output)"


def _part(block: ContentBlock) -> str | Attachment:
    """An image, audio or binary resource block as an attachment, when its data and media type make one; else
    its note (:func:`_note`)."""
    from mcp.types import AudioContent, BlobResourceContents, EmbeddedResource, ImageContent

    data, media_type = None, None
    if isinstance(block, ImageContent | AudioContent):
        data, media_type = block.data, block.mime_type
    elif isinstance(block, EmbeddedResource) and isinstance(block.resource, BlobResourceContents):
        data, media_type = block.resource.blob, block.resource.mime_type
    if data is None or media_type is None:
        return _note(block)
    try:
        return Attachment.from_bytes(base64.b64decode(data, validate=True), media_type)
    except (binascii.Error, ValueError, ConfigInvalid):  # not base64, or a kind no model reads: its note
        return _note(block)


def _repeats(text: str, structured: Any) -> bool:
    """Whether a text block restates the structured content, or the value of a one-key object wrapping it.

    Servers wrap what is not an object: the Python SDK as ``{"result": x}``, the filesystem server as
    ``{"content": x}``; their text block holds x.
    """
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    if parsed == structured:
        return True
    if isinstance(structured, dict) and len(structured) == 1:
        (value,) = structured.values()
        return bool(parsed == value or text == value)
    return False


def _note(block: ContentBlock) -> str:
    """A short note for a block the model cannot read as text; a text resource keeps its text."""
    from mcp.types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextResourceContents

    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type}: {block.mime_type}, {_decoded_size(block.data)} bytes]"
    if isinstance(block, ResourceLink):
        mime = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link: {block.name} <{block.uri}>{mime}]"
    if isinstance(block, EmbeddedResource):
        contents = block.resource
        mime = f", {contents.mime_type}" if contents.mime_type else ""
        if isinstance(contents, TextResourceContents):
            return f"[resource: {contents.uri}{mime}]\n{contents.text}"
        return f"[resource: {contents.uri}{mime}, {_decoded_size(contents.blob)} bytes]"
    return f"[{block.type} content]"  # pragma: no cover - a block type from a later protocol


def _decoded_size(base64_text: str) -> int:
    text = base64_text.strip()
    return len(text) * 3 // 4 - text[-2:].count("=")


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups, which anyio task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _retrieved(call: asyncio.Future[Any]) -> None:
    """Mark the outcome of a call nobody awaits any more (one given up) as seen: asyncio would log it."""
    if not call.cancelled():
        call.exception()
