"""OpenTelemetry spans and metrics for a run, following the GenAI semantic conventions.

Spans follow the current development version of the GenAI conventions (``semantic-conventions-genai``). The
conventions moved the client metrics to a new family: by default tether emits the established
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.*`` histograms, and with
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` the newest ``gen_ai.client.inference.*`` instruments
instead (``otel_metrics.py``). Only ``opentelemetry-api`` is imported here; an application brings the SDK and its
exporters.

Spans of a run (the parent of each in brackets)::

    invoke_agent {agent name}   INTERNAL  [whatever span was current when the run started]
      chat {model}              CLIENT    per provider call (INTERNAL for the embedded and scripted models)
        (spans of the HTTP client, made while the call's context is attached)
      execute_tool {tool name}  INTERNAL  per tool call
        (spans the tool makes, sync tools on worker threads included; tools/call {name} for MCP tools)

``execute_tool`` spans are children of ``invoke_agent``, siblings of the ``chat`` span whose answer asked for
them, as in the conventions' examples: the chat call has ended when its tools run.
An agent run as a tool (``agent.as_tool()``, ``tether.team``) is an ``invoke_agent`` span inside the tool's
``execute_tool`` span, with its own ``chat`` and ``execute_tool`` spans below it; without a tracer provider of
its own it traces to its caller's.

* ``invoke_agent``: ``gen_ai.operation.name=invoke_agent``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
  ``gen_ai.agent.name`` (``Telemetry.agent_name``), ``gen_ai.conversation.id`` (the session id),
  ``server.address``/``server.port``, ``tether.run.id``; at the end the summed ``gen_ai.usage.*``,
  ``tether.stop_reason``, ``tether.turns``. The run is an **error** (status ERROR, ``error.type``) when it
  stopped with ``error``, ``timeout`` or ``invalid_response``: ``error.type`` is the stable code of the error
  that stopped it (``rate_limited``, ``timeout``, ...), else the stop reason. A run the host cancelled, or one a
  guard stopped (``max_turns``, ``max_tool_calls``, ``consecutive_errors``, ``budget``), answered as asked and
  is not an error; ``tether.stop_reason`` says why it stopped.
* ``chat``: ``gen_ai.operation.name=chat``, ``gen_ai.provider.name`` (``openai``, ``anthropic``,
  ``gcp.gemini``, ``deepseek``; tether's own name for the others), ``gen_ai.request.model``,
  ``gen_ai.request.stream=true``, ``gen_ai.request.temperature``/``max_tokens``/``top_p``, ``gen_ai.output.type``
  (``json`` when the answer is constrained by a schema, else ``text``), ``gen_ai.conversation.id``,
  ``server.address``/``server.port``,
  ``tether.turn``, ``tether.attempt``, ``tether.final`` (tools were off: the summary call, or the answer
  asked for after a repeated call); at the end ``gen_ai.response.id``, ``gen_ai.response.model``,
  ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` (cache reads and writes included),
  ``gen_ai.usage.output_tokens``, ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_write.input_tokens``, ``gen_ai.usage.reasoning.output_tokens``,
  ``gen_ai.response.time_to_first_chunk`` (seconds), ``tether.retries``, ``tether.rejected`` (why the answer
  was not used). Each retry is a ``retry`` event (``error.type``, ``tether.retry.attempt``,
  ``tether.retry.wait_s``); each wait of a client-side rate limit a ``rate_limit_wait`` event
  (``tether.rate_limit.wait_s``, ``tether.rate_limit.reason``).
  A failed call (also one cut short by a cancellation or a deadline) has status
  ERROR, ``error.type`` = its stable code, and an ``exception`` event with the redacted message.
* ``execute_tool``: ``gen_ai.operation.name=execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type=function``, ``gen_ai.tool.description``, ``tether.turn``; at the end
  ``tether.tool.outcome`` (``ok``/``error``) and ``tether.tool.code``. An error result has status ERROR and
  ``error.type`` = its code (``tool_failed``, ``tool_timeout``, ``invalid_arguments``, ``permission_denied``,
  ...); what the tool raised is an ``exception`` event (redacted). A call left without a result when the run
  ended is closed then with ``error.type=cancelled``.

**Content** (prompts, answers, tool arguments and results) is captured only when ``Telemetry(capture_content=
True)``, or when it is ``None`` and ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``: then chat spans
get ``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages`` and
``gen_ai.tool.definitions``, the run's span its prompt and answer, ``execute_tool`` spans
``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result`` (``otel_content.py``), all redacted. Otherwise
no content is put anywhere, error descriptions of tool results included (they may quote the arguments).
Error messages and exception text always go through the run's :class:`Redaction`.

**Metrics** (``otel_metrics.py``), through the metrics API:

* ``gen_ai.client.operation.duration`` (histogram, s) per provider call, ``error.type`` on failures;
* ``gen_ai.client.operation.time_to_first_chunk`` (histogram, s);
* ``gen_ai.client.token.usage`` (histogram, {token}, ``gen_ai.token.type`` ``input``/``output``);
* opted in to the latest conventions, instead of those three: ``gen_ai.client.inference.duration``,
  ``gen_ai.client.inference.time_to_first_chunk`` and the counters ``gen_ai.client.inference.usage.input_tokens``,
  ``.output_tokens``, ``.cache_read.input_tokens``, ``.cache_write.input_tokens``, ``.reasoning.output_tokens``
  ({token}, ``gen_ai.token.modality``);
* ``gen_ai.invoke_agent.duration`` (histogram, s), ``gen_ai.invoke_agent.inference_calls`` and
  ``gen_ai.invoke_agent.tool_calls`` (histograms) per run;
* ``gen_ai.execute_tool.duration`` (histogram, s) per tool call that ran, ``error.type`` on error results;
* ``tether.client.requests``, ``tether.client.retries`` and ``tether.client.errors`` (counters, the last two
  by ``error.type``), and ``tether.client.cost`` (counter, USD) per run whose price is known.

Client metrics carry ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
``gen_ai.response.model`` and ``server.address``/``server.port``; the run's carry ``gen_ai.agent.name`` too.

Tracers, meters and instruments are made once per provider object and cached: building a run's observer
costs a few dictionary look-ups. The run's tracer also rides in the run's context (``spans.tracer_key``), so
that spans tether makes inside a tool (``spans.child_span``: the MCP ``tools/call {name}`` client span) go to
the same provider as the run's, also when it was passed in ``Telemetry`` rather than set globally.
"""

from __future__ import annotations

import os
import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from tether.telemetry import otel_content as content
from tether.telemetry.observer import RunObserver
from tether.telemetry.otel_metrics import OPT_IN_VARIABLE, Instruments, input_tokens, wants_latest
from tether.telemetry.spans import tracer_key

if TYPE_CHECKING:
    from tether.errors import ProviderError
    from tether.events import RunResult, ToolCallRecord, TurnRecord
    from tether.messages import Message, ToolCall, ToolResult
    from tether.providers.base import ModelInfo, Request
    from tether.redaction import Redaction
    from tether.telemetry.observer import RunInfo
    from tether.telemetry.settings import Telemetry
    from tether.usage import Usage

__all__ = ["ERROR_STOPS", "PROVIDER_NAMES", "otel_observer"]

SCOPE = "tether"
PROVIDER_NAMES = {
    "openai": "openai", "openai-responses": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini",
    "vertex": "gcp.vertex_ai",
    "deepseek": "deepseek", "groq": "groq", "mistral": "mistral_ai", "xai": "x_ai", "perplexity": "perplexity",
}  # fmt: skip
"""tether's provider names whose conventions' ``gen_ai.provider.name`` differs or is well known; any other
keeps tether's name (``ollama``, ``vllm``, ``zai``, ...)."""
IN_PROCESS = frozenset({"local", "scripted"})
"""Providers whose model runs in this process: their chat spans are INTERNAL."""
ERROR_STOPS = frozenset({"error", "timeout", "invalid_response"})
"""Stop reasons that make the run's span an error (see the module docstring)."""

_NOT_CONFIGURED = frozenset({"ProxyTracerProvider", "NoOpTracerProvider", "_ProxyMeterProvider", "NoOpMeterProvider"})
_lock = threading.Lock()
_tracers: dict[int, tuple[Any, Any]] = {}
_instruments: dict[tuple[int, bool], tuple[Any, Instruments]] = {}


def otel_observer(settings: Telemetry, redaction: Redaction) -> RunObserver | None:
    """The OpenTelemetry observer of a run, or ``None`` when no tracer or meter provider is configured."""
    tracer_provider = settings.tracer_provider or _configured(trace.get_tracer_provider())
    meter_provider = settings.meter_provider or _configured(metrics.get_meter_provider())
    # a run made inside another run's tool call (an agent run as a tool) traces to that run's tracer by default
    inherited = otel_context.get_value(tracer_key()) if tracer_provider is None else None
    if tracer_provider is None and meter_provider is None and inherited is None:
        return None
    tracer = _tracer(tracer_provider) if tracer_provider is not None else inherited
    instruments = _instruments_of(meter_provider) if meter_provider is not None else None
    return OtelObserver(tracer, instruments, redaction, _capture(settings))


def _configured(provider: Any) -> Any:
    """``provider`` unless it is the API's placeholder (nothing was configured)."""
    return None if type(provider).__name__ in _NOT_CONFIGURED else provider


def _capture(settings: Telemetry) -> bool:
    if settings.capture_content is not None:
        return settings.capture_content
    from tether.telemetry.settings import CAPTURE_CONTENT_VARIABLE

    return os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


def _tracer(provider: Any) -> Any:
    cached = _tracers.get(id(provider))
    if cached is not None and cached[0] is provider:
        return cached[1]
    from tether._version import __version__

    with _lock:
        tracer = provider.get_tracer(SCOPE, __version__)
        _tracers[id(provider)] = (provider, tracer)  # the provider is kept so that its id stays its own
    return tracer


def _instruments_of(provider: Any) -> Instruments:
    key = (id(provider), wants_latest(os.environ.get(OPT_IN_VARIABLE)))
    cached = _instruments.get(key)
    if cached is not None and cached[0] is provider:
        return cached[1]
    from tether._version import __version__

    with _lock:
        instruments = Instruments(provider.get_meter(SCOPE, __version__), latest=key[1])
        _instruments[key] = (provider, instruments)
    return instruments


class Attached(AbstractContextManager[None]):
    """Attaches an OpenTelemetry context while entered; reusable, and re-entrant in one task."""

    __slots__ = ("_context", "_tokens")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._tokens: list[Any] = []

    def __enter__(self) -> None:
        self._tokens.append(otel_context.attach(self._context))

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._tokens.pop())


class OtelObserver(RunObserver):
    """Spans and metrics of one run (see the module docstring)."""

    __slots__ = (
        "_asked", "_attributes", "_call", "_call_context", "_capture", "_info", "_instruments", "_redaction", "_run",
        "_run_context", "_tool_calls", "_tools", "_tracer",
    )  # fmt: skip

    def __init__(self, tracer: Any, instruments: Instruments | None, redaction: Redaction, capture: bool) -> None:
        self._tracer = tracer
        self._instruments = instruments
        self._redaction = redaction
        self._capture = capture
        self._info: RunInfo | None = None
        self._attributes: dict[str, Any] = {}
        """The attributes every client span and metric of the run shares."""
        self._run: Any = None
        self._run_context: Any = None
        self._call: Any = None
        self._call_context: Attached | None = None
        self._tools: dict[str, tuple[Any, Any]] = {}
        self._tool_calls = 0
        self._asked: ModelInfo | None = None
        """The model a fallback moved on to: the next call's span names it, not the run's first model."""

    # --- the run ------------------------------------------------------------------------------------------

    def run_started(self, run: RunInfo) -> None:
        self._info = run
        common: dict[str, Any] = {
            "gen_ai.provider.name": PROVIDER_NAMES.get(run.provider, run.provider),
            "gen_ai.request.model": run.model,
        }
        if run.server_address:
            common["server.address"] = run.server_address
            if run.server_port:
                common["server.port"] = run.server_port
        self._attributes = {"gen_ai.operation.name": "chat", **common}
        if self._tracer is None:
            return
        attributes = {"gen_ai.operation.name": "invoke_agent", **common, "tether.run.id": run.run_id}
        if run.agent_name:
            attributes["gen_ai.agent.name"] = run.agent_name
        if run.session_id:
            attributes["gen_ai.conversation.id"] = run.session_id
        if self._capture:
            attributes["gen_ai.input.messages"] = content.input_messages((_user(run.prompt),), self._redaction)
        name = f"invoke_agent {run.agent_name}" if run.agent_name else "invoke_agent"
        parent = otel_context.get_current()
        self._run = span = self._tracer.start_span(name, parent, SpanKind.INTERNAL, attributes)
        self._run_context = trace.set_span_in_context(span, otel_context.set_value(tracer_key(), self._tracer, parent))

    def run_ended(self, result: RunResult) -> None:
        for call_id in list(self._tools):
            self._end_tool(call_id, "cancelled", "the run ended before the tool call had a result")
        if self._call is not None:  # not expected: every call is ended by call_ended
            self._call.end()
            self._call = self._call_context = None
        error_type = _run_error(result)
        if self._instruments is not None:
            attributes = dict(self._attributes, **{"gen_ai.operation.name": "invoke_agent"})
            if self._info is not None and self._info.agent_name:
                attributes["gen_ai.agent.name"] = self._info.agent_name
            self._instruments.run(result, attributes, error_type, self._tool_calls)
        span = self._run
        if span is None:
            return
        self._run = None
        if span.is_recording():
            span.set_attributes(_usage(result.usage))
            span.set_attributes({"tether.stop_reason": str(result.stop_reason), "tether.turns": result.turns})
            if self._capture:
                span.set_attribute("gen_ai.output.messages", content.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": self._redaction.text(result.text)}],
                      "finish_reason": "error" if error_type else "stop"}]))  # fmt: skip
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR, self._redaction.text(result.detail)))
        span.end()

    # --- provider calls -------------------------------------------------------------------------------------

    def call_started(self, turn: int, attempt: int, final: bool, request: Request) -> None:
        if self._tracer is None or self._info is None:
            return
        info = self._info
        attributes = dict(self._attributes)
        attributes.update({"gen_ai.request.stream": True, "tether.turn": turn, "tether.attempt": attempt,
                           "tether.final": final,
                           "gen_ai.output.type": "json" if request.json_schema is not None else "text"})  # fmt: skip
        settings = request.settings
        if settings.temperature is not None:
            attributes["gen_ai.request.temperature"] = settings.temperature
        if settings.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = settings.max_tokens
        if settings.top_p is not None:
            attributes["gen_ai.request.top_p"] = settings.top_p
        if info.session_id:
            attributes["gen_ai.conversation.id"] = info.session_id
        model, asked, self._asked = info.model, self._asked, None
        if asked is not None:
            model = attributes["gen_ai.request.model"] = asked.name
            attributes["gen_ai.provider.name"] = PROVIDER_NAMES.get(asked.provider, asked.provider)
        kind = SpanKind.INTERNAL if info.provider in IN_PROCESS else SpanKind.CLIENT
        span = self._tracer.start_span(f"chat {model}", self._run_context, kind, attributes)
        if self._capture and span.is_recording():
            self._capture_request(span, request)
        self._call = span
        self._call_context = Attached(trace.set_span_in_context(span, self._run_context))

    def _capture_request(self, span: Any, request: Request) -> None:
        redaction = self._redaction
        if request.system:
            span.set_attribute("gen_ai.system_instructions", content.system_instructions(request.system, redaction))
        span.set_attribute("gen_ai.input.messages", content.input_messages(request.messages, redaction))
        if request.tools:
            span.set_attribute("gen_ai.tool.definitions", content.tool_definitions(request.tools))

    def call_context(self) -> AbstractContextManager[Any] | None:
        return self._call_context

    def retry(self, error: ProviderError, attempt: int, wait: float) -> None:
        if self._instruments is not None:
            self._instruments.retry(error.code, self._attributes)
        if self._call is not None:
            self._call.add_event("retry", {"error.type": error.code, "tether.retry.attempt": attempt,
                                           "tether.retry.wait_s": float(wait)})  # fmt: skip

    def fell_back(self, error: ProviderError, failed: ModelInfo, to: ModelInfo) -> None:
        self._asked = to

    def rate_wait(self, delay: float, reason: str) -> None:
        if self._call is not None:
            self._call.add_event("rate_limit_wait", {"tether.rate_limit.wait_s": float(delay),
                                                     "tether.rate_limit.reason": reason})  # fmt: skip

    def call_ended(self, record: TurnRecord, message: Message, error: BaseException | None) -> None:
        if self._instruments is not None:
            self._instruments.call(record, self._attributes)
        span, self._call, self._call_context = self._call, None, None
        if span is None:
            return
        if span.is_recording():
            span.set_attributes(_call_attributes(record))
            if record.rejected is not None:
                span.set_attribute("tether.rejected", self._redaction.text(record.rejected))
            if self._capture and message.parts:
                finish = record.finish_reason
                span.set_attribute("gen_ai.output.messages", content.output_messages(message, finish, self._redaction))
            if record.error is not None:
                self._failed(span, record.error, error)
        span.end()

    # --- tool calls ---------------------------------------------------------------------------------------

    def tool_started(self, call: ToolCall, turn: int) -> None:
        self._tool_calls += 1
        if self._tracer is None:
            return
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                                      "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function",
                                      "tether.turn": turn}  # fmt: skip
        if self._info is not None:
            for definition in self._info.tools:
                if definition.name == call.name:
                    attributes["gen_ai.tool.description"] = definition.description
                    break
        if self._capture:
            attributes["gen_ai.tool.call.arguments"] = content.arguments(call, self._redaction)
        span = self._tracer.start_span(f"execute_tool {call.name}", self._run_context, SpanKind.INTERNAL, attributes)
        self._tools[call.id] = (span, trace.set_span_in_context(span, self._run_context))

    def tool_context(self, call: ToolCall) -> AbstractContextManager[Any] | None:
        started = self._tools.get(call.id)
        return Attached(started[1]) if started is not None else None

    def tool_ended(
        self, call: ToolCall, result: ToolResult, record: ToolCallRecord, exception: BaseException | None
    ) -> None:
        if self._instruments is not None:
            self._instruments.tool(record, "function")
        started = self._tools.pop(call.id, None)
        if started is None:
            return
        span = started[0]
        if span.is_recording():
            span.set_attribute("tether.tool.outcome", "error" if result.is_error else "ok")
            if result.code:
                span.set_attribute("tether.tool.code", result.code)
            if result.is_error:
                code = result.code or "tool_failed"
                span.set_attribute("error.type", code)
                shown = self._redaction.text(result.content) if self._capture else code
                span.set_status(Status(StatusCode.ERROR, shown))
                if exception is not None:  # a tool's exception quotes its arguments: content, only when captured
                    self._exception(span, exception, message=self._capture)
            elif self._capture:
                span.set_attribute("gen_ai.tool.call.result", content.dumps(self._redaction.text(result.content)))
        span.end()

    def _end_tool(self, call_id: str, code: str, why: str) -> None:
        span, _ = self._tools.pop(call_id)
        if span.is_recording():
            span.set_attributes({"tether.tool.outcome": "error", "tether.tool.code": code, "error.type": code})
            span.set_status(Status(StatusCode.ERROR, why))
        span.end()

    # --- errors -------------------------------------------------------------------------------------------

    def _failed(self, span: Any, code: str, error: BaseException | None) -> None:
        span.set_attribute("error.type", code)
        description = self._redaction.text(_message_of(error)) if error is not None else code
        span.set_status(Status(StatusCode.ERROR, description))
        if error is not None:
            self._exception(span, error)

    def _exception(self, span: Any, error: BaseException, *, message: bool = True) -> None:
        """An ``exception`` event with the redacted message (no stack trace: frames may hold anything); its type
        alone without ``message``."""
        attributes = {"exception.type": type(error).__qualname__}
        if message:
            attributes["exception.message"] = self._redaction.text(_message_of(error))
        span.add_event("exception", attributes)


def _user(prompt: str) -> Message:
    from tether.messages import Message

    return Message.user(prompt)


def _call_attributes(record: TurnRecord) -> dict[str, Any]:
    attributes = _usage(record.usage)
    attributes["gen_ai.response.finish_reasons"] = ("error" if record.error is not None else record.finish_reason,)
    if record.model:
        attributes["gen_ai.response.model"] = record.model
    if record.response_id:
        attributes["gen_ai.response.id"] = record.response_id
    if record.ttft_ms is not None:
        attributes["gen_ai.response.time_to_first_chunk"] = record.ttft_ms / 1000.0
    if record.retries:
        attributes["tether.retries"] = record.retries
    if record.cached:
        attributes["tether.cached"] = True
    return attributes


def _usage(usage: Usage) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": input_tokens(usage),
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    if usage.cache_read_tokens:
        attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        attributes["gen_ai.usage.cache_write.input_tokens"] = usage.cache_write_tokens
    if usage.reasoning_tokens:
        attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    return attributes


def _run_error(result: RunResult) -> str | None:
    """``error.type`` of a run that failed (see :data:`ERROR_STOPS`), ``None`` for one that did not."""
    if str(result.stop_reason) not in ERROR_STOPS:
        return None
    code = getattr(result.error, "code", None)
    return code if isinstance(code, str) else str(result.stop_reason)


def _message_of(error: BaseException) -> str:
    """What an error says, for a span: an interrupt's reason, a tether error's message, else ``Type: message``."""
    interrupt = getattr(error, "interrupt", None)
    detail = getattr(interrupt, "detail", None)
    if isinstance(detail, str):
        return detail
    message = getattr(error, "message", None)
    if isinstance(message, str):
        return message
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - a hostile __str__ must not break the span
        text = ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
