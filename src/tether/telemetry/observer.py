"""RunObserver: what the loop tells the telemetry about a run while it happens.

The engine (``loop/engine.py``) and the tool executor (``loop/executor.py``) call these hooks at fixed points;
an observer turns them into spans, metrics or log records. The contract:

* **Order.** ``run_started`` first and ``run_ended`` last, exactly once each, also when the run is cancelled
  or fails. Between them, per provider call: ``call_started``, any ``retry``, ``call_ended`` (always, also
  when the call failed or was interrupted); per tool call: ``tool_started``, then ``tool_ended`` when its
  result is recorded. A tool call that never got a result recorded (the run was interrupted mid-batch) gets
  no ``tool_ended``: ``run_ended`` must close what is still open.
* **Context.** ``call_context()`` and ``tool_context(call)`` return a context manager the loop enters around
  each step of the provider's stream and around the tool's own code, so that work done there (an HTTP client
  span, a span the tool makes, an MCP call) is parented under the call; ``None`` when there is nothing to
  enter. ``call_context()`` is asked once per call and its manager entered and left once per step, so it
  must be reusable. They are entered only across awaits, never across a ``yield``: a host iterating
  ``agent.stream()`` never sees the run's context as its own.
* **Cost.** With no observer (``observer_for`` returns ``None``: no tracer or meter provider configured, no
  logging enabled) the loop calls nothing; hooks run on the event loop and must be cheap. An observer must
  not raise; the loop does not guard against it.
* **Threads.** Synchronous tools run on worker threads; context variables are copied into them, so a span made
  in a sync tool is a child of the tool's span like any other.

:class:`RunObserver` has a no-op for every hook; :class:`Fanout` hands each hook to several observers.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.errors import ProviderError
    from tether.events import RunResult, ToolCallRecord, TurnRecord
    from tether.messages import Message, ToolCall, ToolResult
    from tether.providers.base import ModelInfo, ModelSettings, Request, ToolDefinition


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What an observer knows of a run when it starts."""

    run_id: str
    provider: str
    """The provider's name as tether knows it (``openai``, ``anthropic``, ``ollama``, ``local``, ...)."""
    model: str
    """The model asked for (``gpt-4o-mini``)."""
    prompt: str
    system: str | None
    tools: tuple[ToolDefinition, ...]
    settings: ModelSettings
    tool_mode: str
    """``native`` or ``json`` (JSON actions in the model's text)."""
    history: tuple[Message, ...] = ()
    """The conversation the run continues from (the system prompt aside)."""
    agent_name: str | None = None
    session_id: str | None = None
    server_address: str | None = None
    """Host of the provider's API (``api.openai.com``), when it is an HTTP provider."""
    server_port: int | None = None

    @property
    def model_string(self) -> str:
        return f"{self.provider}:{self.model}"


class RunObserver:
    """Watches one run (see the module docstring for the order of the hooks). Every hook is a no-op here."""

    __slots__ = ()

    def run_started(self, run: RunInfo) -> None:
        """The run begins; called before its first provider call."""

    def call_started(self, turn: int, attempt: int, final: bool, request: Request) -> None:
        """A provider call begins (``final``: tools are off, only an answer is accepted)."""

    def call_context(self) -> AbstractContextManager[Any] | None:
        """Entered around each step of the current provider call's stream (see the module docstring)."""
        return None

    def retry(self, error: ProviderError, attempt: int, wait: float) -> None:
        """The provider failed with a retryable ``error`` and tries again (``attempt``: 1 for the first retry)
        after ``wait`` seconds."""

    def fell_back(self, error: ProviderError, failed: ModelInfo, to: ModelInfo) -> None:
        """A fallback moved on from ``failed`` before its answer began (that attempt's ``call_ended`` came
        first); the next ``call_started`` asks ``to``."""

    def rate_wait(self, delay: float, reason: str) -> None:
        """The provider's client-side rate limit holds the current call ``delay`` seconds before it is sent;
        ``reason`` says what holds it (``requests``, ``tokens``, ``server``, ``retry_after``)."""

    def call_ended(self, record: TurnRecord, message: Message, error: BaseException | None) -> None:
        """The current provider call ended: ``record`` says how (its ``tool_calls`` are not known yet);
        ``message`` is what the model answered (empty when the call failed); ``error`` what ended it, if any."""

    def tool_started(self, call: ToolCall, turn: int) -> None:
        """A tool call's ``ToolCallStarted`` is emitted (it may then be refused, run, or cancelled)."""

    def tool_context(self, call: ToolCall) -> AbstractContextManager[Any] | None:
        """Entered around the tool's own code while it runs (see the module docstring)."""
        return None

    def tool_ended(
        self, call: ToolCall, result: ToolResult, record: ToolCallRecord, exception: BaseException | None
    ) -> None:
        """A tool call's result is recorded (``exception``: what the tool raised, if it did)."""

    def run_ended(self, result: RunResult) -> None:
        """The run has its result; the last hook. Close whatever is still open."""


class Fanout(RunObserver):
    """Hands every hook to several observers, in order."""

    __slots__ = ("observers",)

    def __init__(self, observers: Sequence[RunObserver]) -> None:
        self.observers = tuple(observers)

    def run_started(self, run: RunInfo) -> None:
        for observer in self.observers:
            observer.run_started(run)

    def call_started(self, turn: int, attempt: int, final: bool, request: Request) -> None:
        for observer in self.observers:
            observer.call_started(turn, attempt, final, request)

    def call_context(self) -> AbstractContextManager[Any] | None:
        return _joined([observer.call_context() for observer in self.observers])

    def retry(self, error: ProviderError, attempt: int, wait: float) -> None:
        for observer in self.observers:
            observer.retry(error, attempt, wait)

    def fell_back(self, error: ProviderError, failed: ModelInfo, to: ModelInfo) -> None:
        for observer in self.observers:
            observer.fell_back(error, failed, to)

    def rate_wait(self, delay: float, reason: str) -> None:
        for observer in self.observers:
            observer.rate_wait(delay, reason)

    def call_ended(self, record: TurnRecord, message: Message, error: BaseException | None) -> None:
        for observer in self.observers:
            observer.call_ended(record, message, error)

    def tool_started(self, call: ToolCall, turn: int) -> None:
        for observer in self.observers:
            observer.tool_started(call, turn)

    def tool_context(self, call: ToolCall) -> AbstractContextManager[Any] | None:
        return _joined([observer.tool_context(call) for observer in self.observers])

    def tool_ended(
        self, call: ToolCall, result: ToolResult, record: ToolCallRecord, exception: BaseException | None
    ) -> None:
        for observer in self.observers:
            observer.tool_ended(call, result, record, exception)

    def run_ended(self, result: RunResult) -> None:
        for observer in self.observers:
            observer.run_ended(result)


def _joined(contexts: list[AbstractContextManager[Any] | None]) -> AbstractContextManager[Any] | None:
    present = [context for context in contexts if context is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return _Stacked(present)


class _Stacked(AbstractContextManager[None]):
    """Several context managers entered in order and left in reverse."""

    def __init__(self, contexts: list[AbstractContextManager[Any]]) -> None:
        self._contexts = contexts
        self._stack: ExitStack | None = None

    def __enter__(self) -> None:
        stack = ExitStack()
        for context in self._contexts:
            stack.enter_context(context)
        self._stack = stack

    def __exit__(self, *exc: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.__exit__(*exc)  # type: ignore[arg-type]
