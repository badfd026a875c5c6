"""``ask()`` and :class:`Assistant`: one bounded question about a live Python namespace.

The contract
------------
* **A question is one run** of the agent loop with the capabilities of ``tether.tools.python_runtime`` over
  the namespace as its only tools, the assistant's system prompt and :data:`~tether.assistant.defaults.
  ASK_LIMITS`. Nothing is remembered between questions.
* **The model** is ``model=`` (a ``provider:model`` string or a Provider), else ``TETHER_MODEL``, else the
  command line's own choice (a provider whose key is set, else the embedded model: ``providers/default_model.py``);
  :class:`Assistant` resolves it once. A model that cannot call functions natively is refused at once with
  ``ConfigInvalid`` naming what to change; JSON actions are used only when ``tool_mode="json"`` asks for them.
* **Threads.** ``ask()`` runs the loop on a worker thread and serves the capability calls and the events on
  the calling thread, in order (``bridge.py``); Ctrl-C there cancels the question and returns its
  ``cancelled`` result. ``ask_async()`` runs on the caller's event loop, and the calls run on its thread.
* **Envelopes.** Every function call is answered with the runtime's envelope (``{"ok": ...}``), a call of a
  function the assistant did not declare too: ``unknown_function``, naming the functions there are.
* **The answer.** A question that ends degraded (a limit, an error, a cancel) answers with the soft-fail text
  of ``findings.py``: the limitation and what the completed calls confirmed. ``on_event`` gets the run's
  events as they happen (``TextDelta`` as the answer streams); for a degraded question, the soft-fail text the
  model did not write comes as one more ``TextDelta`` before ``RunCompleted``, whose result is the one
  returned. An exception ``on_event`` raises cancels the question and is raised once the run has ended.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal

from tether.agent import Agent
from tether.assistant.bridge import Bridge, Envelope
from tether.assistant.defaults import ask_limits, system_prompt
from tether.assistant.findings import CallLog, soft_fail
from tether.errors import ConfigInvalid
from tether.events import RunCompleted, RunEvent, RunResult, TextDelta
from tether.limits import Limits
from tether.messages import ToolCall
from tether.providers.base import Provider
from tether.providers.registry import resolve
from tether.run_handles import RunStream

if TYPE_CHECKING:
    from tether.loop.sinks import EventSink
    from tether.tools.python_runtime import PythonRuntime, RuntimeSettings

ToolMode = Literal["native", "json"]
LastException = BaseException | None | EllipsisType
"""The exception ``get_last_exception`` reports; ``...`` (the default): the interpreter's last one."""
MODEL_VARIABLE = "TETHER_MODEL"


class Assistant:
    """What a REPL holds: the model, resolved and checked once, and the settings of its questions."""

    def __init__(
        self,
        model: str | Provider | None = None,
        *,
        settings: RuntimeSettings | None = None,
        limits: Limits | None = None,
        tool_mode: ToolMode = "native",
    ) -> None:
        """
        Args:
            model: a ``provider:model`` string or a Provider; ``None``: ``TETHER_MODEL``, else the model the
                command line would choose.
            settings: the capabilities' limits (``RuntimeSettings``: truncation, ``eval_timeout``,
                ``allow_eval=False`` for a read-only assistant).
            limits: the limits of each question; ``ASK_LIMITS`` when not given (``LOCAL_ASK_LIMITS`` for a
                model run in this process).
            tool_mode: ``"native"`` (the model must call functions natively) or ``"json"`` (JSON actions in
                its text, for a model that cannot).
        """
        if tool_mode not in ("native", "json"):
            raise ConfigInvalid(f"tool_mode must be 'native' or 'json', not {tool_mode!r}")
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigInvalid(f"limits must be a tether.Limits, not {type(limits).__name__}")
        self.provider = resolve_model(model, os.environ)
        check_model(self.provider, tool_mode)
        self.settings = settings
        self.limits = limits if limits is not None else ask_limits(self.provider.info.provider)
        self.tool_mode: ToolMode = tool_mode

    def ask(
        self,
        question: str,
        namespace: MutableMapping[str, Any] | None = None,
        *,
        last_exception: LastException = ...,
        on_event: EventSink | None = None,
    ) -> RunResult:
        """Answer ``question`` about ``namespace`` (``None``: ``__main__``'s); blocks until the answer, serving
        the capability calls on this thread. Ctrl-C cancels the question and returns its result."""
        log = CallLog()
        runtime = self._runtime(namespace, last_exception)
        bridge = Bridge()
        stream = self._agent(runtime, bridge.call).stream(_checked(question), on_event=bridge.event)

        def run_call(name: str, arguments: Mapping[str, Any]) -> Envelope:
            envelope = runtime.call(name, arguments)
            log.record(name, arguments, envelope)
            return envelope

        thread = bridge.start(lambda: _result_of(stream))
        result = bridge.serve(thread, run_call, stream.cancel, _held(on_event))
        return self._answer(result, log, on_event)

    async def ask_async(
        self,
        question: str,
        namespace: MutableMapping[str, Any] | None = None,
        *,
        last_exception: LastException = ...,
        on_event: EventSink | None = None,
    ) -> RunResult:
        """``ask()`` on the running event loop; the capability calls run on its thread."""
        log = CallLog()
        runtime = self._runtime(namespace, last_exception)

        async def run_call(name: str, arguments: dict[str, Any]) -> Envelope:
            envelope = runtime.call(name, arguments)
            log.record(name, arguments, envelope)
            return envelope

        streams: list[RunStream] = []
        failures: list[Exception] = []

        def sink(event: RunEvent) -> None:
            if on_event is None or failures or type(event) is RunCompleted:
                return
            try:
                on_event(event)
            except Exception as error:  # noqa: BLE001 - the host's sink failed: cancel, then raise it
                failures.append(error)
                streams[0].cancel()

        streams.append(self._agent(runtime, run_call).stream(_checked(question), on_event=sink))
        result = await _result_of(streams[0])
        if failures:
            raise failures[0]
        return self._answer(result, log, on_event)

    def _runtime(self, namespace: MutableMapping[str, Any] | None, last_exception: LastException) -> PythonRuntime:
        from tether.tools.python_runtime import PythonRuntime, RuntimeSettings

        if namespace is None:
            namespace = vars(sys.modules["__main__"])
        elif not isinstance(namespace, MutableMapping):
            raise ConfigInvalid(f"namespace must be a dict (a module's globals), not {type(namespace).__name__}")
        settings = self.settings if self.settings is not None else RuntimeSettings()
        if last_exception is ...:
            return PythonRuntime(namespace, settings=settings)
        if last_exception is not None and not isinstance(last_exception, BaseException):
            raise ConfigInvalid(f"last_exception must be an exception or None, not {type(last_exception).__name__}")
        given = last_exception
        return PythonRuntime(namespace, last_exception=lambda: given, settings=settings)

    def _agent(self, runtime: PythonRuntime, run_call: Callable[[str, dict[str, Any]], Any]) -> Agent:
        from tether.tools.python_runtime import envelope_text

        def unknown(call: ToolCall, offered: Sequence[str]) -> str:
            return envelope_text(runtime.unknown_function(call.name))  # any thread: no namespace read

        return Agent(
            self.provider,
            tools=runtime.tools(run_call),
            unknown_tool=unknown,
            system=system_prompt(runtime.names),
            limits=self.limits,
            tool_mode=self.tool_mode,
            cache_tool_outputs=None,
            compaction=False,
        )

    def _answer(self, result: RunResult, log: CallLog, on_event: EventSink | None) -> RunResult:
        """The question's result, the soft-fail answer in place for a degraded one, announced to ``on_event``."""
        answered, added = soft_fail(result, log.calls, self.limits)
        if on_event is not None:
            if added:
                on_event(TextDelta(added))
            on_event(RunCompleted(answered))
        return answered


def ask(
    question: str,
    namespace: MutableMapping[str, Any] | None = None,
    *,
    model: str | Provider | None = None,
    last_exception: LastException = ...,
    settings: RuntimeSettings | None = None,
    on_event: EventSink | None = None,
    tool_mode: ToolMode = "native",
    limits: Limits | None = None,
) -> RunResult:
    """Ask the assistant about a live Python namespace (``None``: ``__main__``'s) and return its answer.

    ``ask("what is in df?")`` in a REPL answers from the session's globals. See :class:`Assistant` for the
    arguments; a program asking many questions holds one ``Assistant`` instead, so the model is resolved once.
    """
    assistant = Assistant(model, settings=settings, limits=limits, tool_mode=tool_mode)
    return assistant.ask(question, namespace, last_exception=last_exception, on_event=on_event)


async def ask_async(
    question: str,
    namespace: MutableMapping[str, Any] | None = None,
    *,
    model: str | Provider | None = None,
    last_exception: LastException = ...,
    settings: RuntimeSettings | None = None,
    on_event: EventSink | None = None,
    tool_mode: ToolMode = "native",
    limits: Limits | None = None,
) -> RunResult:
    """:func:`ask` on the running event loop."""
    assistant = Assistant(model, settings=settings, limits=limits, tool_mode=tool_mode)
    return await assistant.ask_async(question, namespace, last_exception=last_exception, on_event=on_event)


def resolve_model(model: str | Provider | None, env: Mapping[str, str]) -> Provider:
    """The question's provider: ``model``, else ``TETHER_MODEL``, else the command line's choice."""
    if model is None:
        from tether.providers.default_model import choose_model

        choice = choose_model(env.get(MODEL_VARIABLE) or None, env)
        if choice.model is None:
            problem = (choice.problem or "no model could be chosen.").removeprefix("error: ")
            raise ConfigInvalid(f"the Python assistant has no model: {problem}\nOr pass model= to ask().")
        model = choice.model
    return resolve(model)


def check_model(provider: Provider, tool_mode: ToolMode) -> None:
    """Refuse a model that cannot call functions natively, unless JSON actions were asked for."""
    if tool_mode == "native" and not provider.info.supports_tools:
        name = provider.info.model_string
        raise ConfigInvalid(
            f"the Python assistant needs a model that calls functions natively, and {name!r} cannot: choose "
            f"another with model=... or the {MODEL_VARIABLE} variable (for example "
            f"{MODEL_VARIABLE}=openai:gpt-4o-mini), or pass tool_mode='json' to let it act through JSON in its text",
            details={"model": name, "setting": MODEL_VARIABLE},
        )


def _checked(question: str) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ConfigInvalid(f"ask() needs a question: a non-empty string, not {question!r}")
    return question


def _held(on_event: EventSink | None) -> EventSink | None:
    """``on_event`` without the run's own ``RunCompleted``: the question's comes after its soft-fail answer."""
    if on_event is None:
        return None

    def sink(event: RunEvent) -> None:
        if type(event) is not RunCompleted:
            on_event(event)

    return sink


async def _result_of(stream: RunStream) -> RunResult:
    result: RunResult | None = None
    async for event in stream:
        if type(event) is RunCompleted:
            result = event.result
    assert result is not None, "a run always ends with RunCompleted"
    return result
