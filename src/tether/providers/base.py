"""What a provider is: something that turns a :class:`Request` into a stream of ``LlmEvent``s.

The contract every provider keeps:

* ``stream()`` yields ``StreamStart`` first (optional), then deltas, then exactly one ``StreamEnd``. Every
  ``ToolCallStart`` is closed by a ``ToolCallEnd`` unless the output was cut off (``finish_reason="length"``).
* Failures are raised as :class:`~tether.errors.ProviderError` subclasses with a stable code. Retries happen
  inside the provider and only before its first event: once an event has been yielded, a failure is final.
* ``Request.timeout`` is the provider's to keep: a wait for the first byte, or between two chunks, longer than
  that fails with ``RequestTimeout`` (code ``timeout``). The loop only bounds the whole call (``step_timeout``).
* ``stream()`` returns an async iterator: an async generator, or any iterator with an ``aclose()`` (the HTTP
  providers return their client's own, ``HttpClient.answer``). Nothing is sent before its first event is asked
  for. If the consumer stops early (cancellation, timeout), the iterator is closed and must release its
  connection.
* A provider knows nothing of tools' code or of the loop; it sees tool definitions and messages only.
* Data a provider needs back on a later turn (a thinking block's signature, encrypted reasoning, a thought
  signature) rides in ``signature`` / ``provider_data`` and is marked with ``provider_data["origin"]``, the
  provider's name. A provider replays only what carries its own origin: a history written by one provider
  can be continued with another, whose API would reject a foreign signature. A ``ThinkingDelta`` with a
  ``signature`` closes its thinking block (``StreamAccumulator``).
* ``ModelSettings.extra`` is merged into the request body with :func:`merge_extra` (nested objects merged).
* ``Request.tool_choice`` is sent as the API documents it. A choice the API cannot honour is never sent as if
  it could: ``ModelInfo.tool_choices`` says which ones a provider honours (the loop refuses the others before
  a run starts), and a request asking for one anyway raises ``ConfigInvalid``. ``"none"`` is always honoured:
  where an API has no way to say it, the tools are left out of that request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Literal, Protocol, TypeAlias, runtime_checkable

import msgspec

from tether.errors import ProviderError
from tether.events import FinishReason, LlmEvent
from tether.exchanges import ExchangeRecorder
from tether.messages import JsonObject, Message

__all__ = [
    "TOOL_CHOICES",
    "FinishReason",
    "ForceTool",
    "ModelInfo",
    "ModelSettings",
    "OnFallback",
    "OnRetry",
    "OnWait",
    "Provider",
    "Request",
    "ServedProvider",
    "Server",
    "ToolChoice",
    "ToolDefinition",
    "merge_extra",
]


class ToolDefinition(msgspec.Struct, frozen=True, gc=False):
    """A tool as the model is told about it: a name, what it does, and a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: JsonObject


class ForceTool(msgspec.Struct, frozen=True, gc=False):
    """Make the model call this tool."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | ForceTool
TOOL_CHOICES = frozenset({"auto", "none", "required", "tool"})
"""What ``ModelInfo.tool_choices`` may hold: the three modes, and ``"tool"`` for a forced tool (:class:`ForceTool`)."""
OnRetry: TypeAlias = Callable[[ProviderError, int, float], None]
"""Told of each retry a provider makes: the error, the attempt it starts (1 for the first retry), the wait in
seconds before it."""

OnWait: TypeAlias = Callable[[float, str], None]
"""Told of each wait of a provider's client-side rate limit before it: the seconds, and what holds the request
(``requests``, ``tokens``, ``server``, ``retry_after``)."""


class ModelSettings(msgspec.Struct, frozen=True):
    """Sampling settings sent with every request; ``None`` leaves the provider's default."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    extra: JsonObject = msgspec.field(default_factory=dict)
    """Provider-specific body fields, merged into the request as given."""


class OutputFormat(msgspec.Struct, frozen=True, gc=False):
    """An answer asked for as JSON (a typed output's ``native`` and ``prompted`` modes): under ``schema`` when
    it is given (the provider's structured output; ``strict`` where the schema allows), else any JSON object
    (the provider's JSON mode, where it has one)."""

    name: str
    schema: JsonObject | None = None
    strict: bool = False


class Request(msgspec.Struct, frozen=True):
    """One provider call: the conversation so far, the tools on offer and how to answer."""

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolDefinition, ...] = ()
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool | None = None
    settings: ModelSettings = ModelSettings()
    timeout: float | None = None
    """Seconds to wait for the first byte and between chunks (``Limits.request_timeout``)."""
    deadline: float | None = None
    """``loop.time()`` after which the run stops; providers cap their retries by it."""
    json_schema: JsonObject | None = None
    """Constrain the answer to this JSON Schema (JSON action mode), when ``ModelInfo.supports_json_schema``."""
    output: OutputFormat | None = None
    """The answer as JSON, to be read as a typed output (when the request has no tools to call, or as the
    provider allows beside them)."""
    on_retry: OnRetry | None = None
    """Called before each retry the provider makes (for the run's records, logs and spans); must not raise,
    except a durable run's, which ends the attempt's step with ``RetryLater`` (``tether.loop.steps``): an
    exception from it reaches the provider's caller as it is."""
    on_fallback: OnFallback | None = None
    """Called when a fallback provider moves on to its next model (for the run's records and spans); must not
    raise. ``None`` for a run whose model is not a fallback."""
    cache_key: str | None = None
    """The run's session id, when it has one: what groups this request with the others of its conversation for a
    provider that routes its prompt cache by a key (OpenAI's ``prompt_cache_key``)."""
    on_wait: OnWait | None = None
    """Called before each wait of the provider's client-side rate limit (``RateLimitWait``), with its seconds and
    what holds it (for the run's spans); must not raise."""
    record: ExchangeRecorder | None = None
    """Set when the run keeps its exchanges (``tether.exchanges``): a provider that speaks HTTP hands it the body
    it posts and the answer as it reads it. ``None`` (the default): nothing is copied."""


class ModelInfo(msgspec.Struct, frozen=True, gc=False):
    """Which model a provider talks to, and what it can do."""

    provider: str
    name: str
    supports_tools: bool = True
    supports_streaming: bool = True
    supports_thinking: bool = False
    supports_json_schema: bool = False
    """Can generate under a JSON Schema (``Request.json_schema``): grammar-constrained decoding."""
    input_kinds: frozenset[str] = frozenset({"text"})
    """What the model reads besides text (``image``, ``document``, ``audio``: ``messages.Attachment``); a part of
    another kind is refused before anything is sent."""
    supports_output_schema: bool = False
    """Honours ``Request.output``'s schema (the API's structured output): a typed output's ``native`` mode is
    its default when the model cannot call tools."""
    context_window: int | None = None
    tool_choices: frozenset[str] = TOOL_CHOICES
    """The ``Request.tool_choice`` values the provider honours (of :data:`TOOL_CHOICES`): ``"auto"`` and
    ``"none"`` always; ``"required"`` and ``"tool"`` where the API can make the model call a tool."""

    @property
    def model_string(self) -> str:
        """The ``provider:model`` string, as used for price lookup and display."""
        return f"{self.provider}:{self.name}"


OnFallback: TypeAlias = Callable[[ProviderError, ModelInfo, ModelInfo], None]
"""Told when a fallback moves on (``fallback.py``): the error, the model that failed, the model asked next."""


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. See the module docstring for the contract."""

    @property
    def info(self) -> ModelInfo:
        """The model and its capabilities."""
        ...

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """Answer ``request`` as a stream of events (an async iterator with ``aclose()``; see the module docstring)."""
        ...


Server: TypeAlias = tuple[str | None, int | None]
"""Where a model is served: host and port (``None`` where not known)."""


@runtime_checkable
class ServedProvider(Provider, Protocol):
    """A provider whose model is served over the network (every HTTP provider): where it is, and the credentials
    it sends. A provider of another make need not be one; a run then masks no key of its own and names no
    server in its telemetry."""

    def credentials(self) -> tuple[str, ...]:
        """The secrets the provider sends with each request (its API key; ``()`` for none): every tool result,
        error and log line of a run is masked of them."""
        ...

    @property
    def server(self) -> Server:
        """The host and port of the provider's API (``server.address`` and ``server.port`` in spans)."""
        ...


def merge_extra(body: JsonObject, extra: JsonObject) -> JsonObject:
    """``body`` with ``extra`` merged in: nested objects are merged key by key, anything else replaced."""
    for key, value in extra.items():
        current = body.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            body[key] = merge_extra(dict(current), value)
        else:
            body[key] = value
    return body
