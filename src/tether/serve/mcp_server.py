"""An agent as an MCP server: one tool that runs it (``tether mcp serve``, docs/serving.md "MCP server mode").

An MCP client (an editor, a desktop assistant, another agent) sees a single tool, named after the agent (or as
asked), whose input is ``{"prompt": string, "session_id"?: string}``. A call runs the agent on the prompt:

* **Answer.** The answer's text as ``TextContent``; for an agent with an ``output_type``, its output as
  ``structuredContent`` too, described by the tool's ``outputSchema`` (an object at the root: a type whose own
  schema is not an object is given as ``{"result": ...}``, as the typed output's tool takes it).
* **Progress.** When the client sent a ``progressToken``, a ``notifications/progress`` per turn and per tool
  call (started and ended) while the run goes on: a count that only grows, and a message saying which.
* **Cancellation.** ``notifications/cancelled`` for the call cancels the run: it ends ``cancelled`` with a
  valid transcript (every tool call with its result, saved in its session), and the server goes on serving.
* **Failure.** A run that ends other than with an answer (a guard, a provider's failure) is ``isError: true``
  with its stop reason and detail; so is a call with bad arguments (``invalid_arguments``). An unknown tool
  name is a protocol error, as MCP says.
* **Sessions.** ``session_id`` continues a conversation: in the agent's session store when it has one (the
  session is started by the first call naming it), else in this server's memory (the latest
  :data:`KEPT_SESSIONS`). Calls in one session run one after the other; calls without one run alone.
* **Secrets.** What leaves the server (answers, outputs, progress messages, errors) has the agent's known keys
  masked (``Agent.secrets``); errors pass through :class:`~tether.redaction.Redaction` too.

The SDK (the ``mcp`` extra) is imported when a server is made, never by ``import tether``. The transports,
stdio and streamable HTTP, are :mod:`tether.serve.mcp_transports`'.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from tether._logging import get_logger
from tether.errors import ConfigInvalid, InvalidArguments, TetherError
from tether.events import RunCompleted, RunResult, ToolCallStarted, ToolResultReceived, TurnStarted
from tether.limits import StopReason
from tether.messages import Message
from tether.redaction import Redaction
from tether.run_handles import RunStream
from tether.secrets import mask_exception_in_place
from tether.serve.sources import ServedAgent

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

    from tether.output import OutputSpec

__all__ = ["ANSWERED", "KEPT_SESSIONS", "MCPAgentServer", "tool_name"]

log = get_logger("tether.serve.mcp")

ANSWERED = frozenset({StopReason.COMPLETE, StopReason.DONE_TOOL, StopReason.ASK_USER})
"""The stops that are an answer; any other ends the call with ``isError: true``."""
KEPT_SESSIONS = 1000
"""Conversations kept in memory for an agent without a session store; the least recently used goes first."""
CANCEL_GRACE = 30.0
"""Seconds a cancelled run may take to close its transcript before the server stops waiting for it."""
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""What MCP allows in a tool's name."""


def tool_name(agent: ServedAgent, name: str | None = None) -> str:
    """The MCP tool's name: ``name`` when given (``ConfigInvalid`` unless it is 1-128 letters, digits, ``_``,
    ``-`` or ``.``), else the agent's name made fit (other characters as ``_``), else ``agent``."""
    if name is not None:
        if not _NAME.fullmatch(name):
            raise ConfigInvalid(f"the MCP tool's name must be 1-128 letters, digits, '_', '-' or '.', not {name!r}")
        return name
    fitted = re.sub(r"[^A-Za-z0-9_.-]", "_", (agent.name or "").strip())[:128]
    return fitted or "agent"


class MCPAgentServer:
    """``agent`` as an MCP server of one tool (see the module docstring); :attr:`server` is the SDK's.

    ``on_run_end`` is called with each call's result (a command writes a line for it); ``description`` is the
    tool's, for the client's model to read (a default says what the tool does).
    """

    def __init__(
        self,
        agent: ServedAgent,
        *,
        name: str | None = None,
        description: str | None = None,
        on_run_end: Callable[[RunResult[Any]], None] | None = None,
    ) -> None:
        if not isinstance(agent, ServedAgent):  # a DurableAgent is not: its runs are not this process's
            raise ConfigInvalid(f"an MCP server serves a tether Agent, not a {type(agent).__name__}")
        if getattr(agent, "deps_type", None) is not None:
            raise ConfigInvalid("an agent whose runs need deps (deps_type=) cannot be served: a call cannot give them")
        self.agent = agent
        self.name = tool_name(agent, name)
        self.description = description or (
            f"Ask the agent {self.name!r}: it works on the prompt (with its own model and tools) and answers. "
            "Give the same session_id to continue a conversation."
        )
        self._on_run_end = on_run_end
        self._histories: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._output = _output_of(agent)
        self.server: Server[Any] = self._make_server()

    def _make_server(self) -> Server[Any]:
        from mcp.server import Server

        from tether._version import __version__

        return Server(
            self.name,
            version=__version__,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    def tool_schema(self) -> dict[str, Any]:
        """The tool's input schema: a prompt, and a session to continue."""
        return {
            "type": "object",
            "properties": {
                "prompt": {"type": "string", "description": "What to ask the agent."},
                "session_id": {
                    "type": "string",
                    "description": "A conversation to continue (or start) under this id; left out: a new one.",
                },
            },
            "required": ["prompt"],
            "additionalProperties": False,
        }

    def output_schema(self) -> dict[str, Any] | None:
        """The tool's output schema: the typed output's (always an object), or ``None`` for a text agent."""
        return self._output[0] if self._output is not None else None

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        from mcp.types import ListToolsResult, Tool

        tool = Tool(
            name=self.name,
            description=self.description,
            input_schema=self.tool_schema(),
            output_schema=self.output_schema(),
        )
        return ListToolsResult(tools=[tool])

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_PARAMS

        if params.name != self.name:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            prompt, session_id = _arguments(params.arguments)
        except InvalidArguments as error:
            return self._error(error.code, error.message)
        progress = Progress(ctx, self.agent.secrets.mask)
        try:
            result = await self.run(prompt, session_id, progress)
        except TetherError as error:  # refused before it ran: a session the store cannot give, a prompt refused
            return self._error(error.code, error.message)
        except Exception as error:  # a bug's: said as an error result, masked, never the SDK's raw message
            mask_exception_in_place(error, self.agent.secrets)  # before the log prints its chain
            log.exception("a call of %s failed", self.name)
            return self._error("error", f"{type(error).__name__}: {error}")
        return self._answer(result)

    async def run(self, prompt: str, session_id: str | None, progress: Progress | None = None) -> RunResult[Any]:
        """Run the agent on ``prompt`` (in ``session_id``), reporting to ``progress``; cancelled (the caller's
        task), the run is cancelled and closed, its transcript valid and kept, then the cancellation goes on."""
        lock: AbstractAsyncContextManager[Any] = self._lock(session_id) if session_id is not None else nullcontext()
        async with lock:
            stream = self._open(prompt, session_id)
            task = asyncio.get_running_loop().create_task(_drive(stream, progress))
            try:
                result = await asyncio.shield(task)
            except asyncio.CancelledError:
                await self._close_cancelled(stream, task, progress, session_id)
                raise
            self._ended(session_id, result)
            return result

    def _open(self, prompt: str, session_id: str | None) -> RunStream:
        stream: RunStream
        if session_id is None:
            stream = self.agent.stream(prompt)
        elif self.agent.store is not None:
            stream = self.agent.stream(prompt, session=session_id)
        else:
            stream = self.agent.stream(prompt, history=self._histories.get(session_id, ()))
        return stream

    async def _close_cancelled(
        self, stream: RunStream, task: asyncio.Task[RunResult[Any]], progress: Progress | None, session_id: str | None
    ) -> None:
        """The run of a cancelled call: cancelled, awaited (shielded, within :data:`CANCEL_GRACE`) so that its
        transcript is closed and saved before the call's cancellation goes on."""
        import anyio

        stream.cancel()
        if progress is not None:
            progress.stop()
        with anyio.move_on_after(CANCEL_GRACE, shield=True):
            try:
                result = await task
            except Exception as error:  # the run's own failure: logged, the cancellation still goes on
                mask_exception_in_place(error, self.agent.secrets)
                log.exception("the cancelled run failed while closing")
                return
            self._ended(session_id, result)
            return
        log.warning("the cancelled run did not close within %.0f seconds", CANCEL_GRACE)

    def _ended(self, session_id: str | None, result: RunResult[Any]) -> None:
        if session_id is not None and self.agent.store is None:
            self._histories[session_id] = result.messages
            self._histories.move_to_end(session_id)
            while len(self._histories) > KEPT_SESSIONS:
                self._histories.popitem(last=False)
        log.info("run %s ended: %s", result.run_id, result.stop_reason)
        if self._on_run_end is not None:
            self._on_run_end(result)

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            if len(self._locks) > KEPT_SESSIONS:  # the idle ones go: a lock held or waited for is kept
                idle = [key for key, kept in self._locks.items() if not kept.locked() and not kept._waiters]
                for key in idle:
                    del self._locks[key]
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    def _answer(self, result: RunResult[Any]) -> CallToolResult:
        from mcp.types import CallToolResult, TextContent

        if result.stop_reason not in ANSWERED:
            code = getattr(result.error, "code", None) or str(result.stop_reason)
            detail = result.detail or (str(result.error) if result.error is not None else "")
            return self._error(code, f"the run stopped: {result.stop_reason}" + (f": {detail}" if detail else ""))
        mask = self.agent.secrets.mask
        structured = None
        if self._output is not None and result.output is not None:
            structured = json.loads(mask(json.dumps(_jsonable(result.output, wrapped=self._output[1]))))
        return CallToolResult(content=[TextContent(text=mask(result.text))], structured_content=structured)

    def _error(self, code: str, message: str) -> CallToolResult:
        from mcp.types import CallToolResult, TextContent

        shown = Redaction(self.agent.secrets).text(message)  # the agent's keys now: they may have changed
        return CallToolResult(content=[TextContent(text=f"[{code}] {shown}")], is_error=True)


class Progress:
    """A call's progress notifications: one per step, numbered from 1; none once the call was cancelled, nor
    when the client asked for none (the SDK sends nothing without a ``progressToken``)."""

    __slots__ = ("_count", "_ctx", "_mask", "_stopped")

    def __init__(self, ctx: ServerRequestContext[Any, Any], mask: Callable[[str], str]) -> None:
        self._ctx, self._mask = ctx, mask
        self._count = 0
        self._stopped = False

    async def say(self, message: str) -> None:
        if self._stopped:
            return
        self._count += 1
        try:
            await self._ctx.session.report_progress(self._count, None, self._mask(message))
        except Exception:  # a client gone or slow to read: the run goes on without its progress
            log.debug("a progress notification was not sent", exc_info=True)
            self._stopped = True

    def stop(self) -> None:
        self._stopped = True


async def _drive(stream: RunStream, progress: Progress | None) -> RunResult[Any]:
    """The run's events, read to its result; each turn and tool call said to ``progress``."""
    result: RunResult[Any] | None = None
    async for event in stream:
        if isinstance(event, RunCompleted):
            result = event.result
        elif progress is None:
            continue
        elif isinstance(event, TurnStarted):
            await progress.say(f"turn {event.turn}")
        elif isinstance(event, ToolCallStarted):
            await progress.say(f"tool {event.call.name} started")
        elif isinstance(event, ToolResultReceived):
            done = event.result
            await progress.say(f"tool {done.name} {'failed' if done.is_error else 'done'}")
    assert result is not None, "a run always ends with RunCompleted"
    return result


def _arguments(arguments: dict[str, Any] | None) -> tuple[str, str | None]:
    """The call's prompt and session id; ``InvalidArguments`` saying what is wrong with them."""
    given = arguments or {}
    prompt, session_id = given.get("prompt"), given.get("session_id")
    unknown = sorted(set(given) - {"prompt", "session_id"})
    if unknown:
        raise InvalidArguments(f"unknown arguments: {', '.join(unknown)}; the tool takes prompt and session_id")
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidArguments("prompt must be a non-empty string")
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
        raise InvalidArguments("session_id must be a non-empty string when given")
    return prompt, session_id


def _output_of(agent: ServedAgent) -> tuple[dict[str, Any] | None, bool] | None:
    """The agent's typed output as the tool gives it: its object schema (``None`` for an output function, whose
    schema is its arguments') and whether the output is wrapped as ``{"result": ...}``; ``None`` for text."""
    spec: OutputSpec | None = getattr(agent, "_spec").output  # noqa: B009 - the agent's own, fixed at construction
    if spec is None:
        return None
    choices: Sequence[Any] = spec.choices
    if any(choice.function is not None for choice in choices):
        return None, True
    wrapped = len(choices) > 1 or bool(choices[0].wrapped)
    return dict(spec.native_schema), wrapped


def _jsonable(output: Any, *, wrapped: bool) -> Any:
    from pydantic_core import to_jsonable_python

    value = to_jsonable_python(output)
    return {"result": value} if wrapped else value
