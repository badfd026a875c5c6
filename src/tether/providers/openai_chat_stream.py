"""OpenAI Chat Completions answers, streamed or whole, read into tether's ``LlmEvent``s.

One decoder (:class:`ChatDecoder`) reads streamed chunks and whole completions into the same events: text,
reasoning (``reasoning_content`` as DeepSeek, vLLM and llama.cpp send it, ``reasoning`` as Ollama does; the
fields a server uses are its :class:`~tether.providers.registry.Profile`'s) as thinking, refusals as text
marked ``{"refusal": true}``, tool calls assembled by their ``index`` (several may stream interleaved; a call
without an ``id`` gets one; the deprecated single ``function_call`` is read as the call at index 0), the finish
reason and usage.

An answer is read into the typed wire shapes below (:class:`~tether.providers.wire.Shape`): a field of the
wrong JSON type (at any depth) is ``InvalidResponse`` naming it, and no event ever carries a value of the wrong
Python type. ``content`` may also be a list of parts, as some servers send it: its ``text`` parts are the
text. Usage counts are read forgivingly. A tool call's ``extra_content`` (where Gemini's OpenAI-compatible
endpoint puts the call's thought signature, streamed or not) is kept in the call's ``provider_data`` as
``{"origin": <profile name>, "extra_content": {...}}``; one that arrives after its call started is kept on
the message, in ``StreamEnd.provider_data`` by call id.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec

from tether.events import (
    FinishReason,
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.providers.decoding import unfinished
from tether.providers.http.errors import error_for_payload
from tether.providers.registry import Profile
from tether.providers.wire import Shape, as_count, malformed
from tether.usage import NO_USAGE, Usage

__all__ = ["CALL_EXTRA", "ChatDecoder", "parse_usage"]

CALL_EXTRA = "extra_content"
"""The key, in a tool call's ``provider_data`` (or, keyed by call id, in its message's), of the call's
``extra_content`` as the server sent it; Gemini's OpenAI-compatible endpoint carries the call's thought
signature there (``{"google": {"thought_signature": ...}}``) and refuses a follow-up without it."""

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


# --- the wire shapes ------------------------------------------------------------------------------------------


class _Function(msgspec.Struct, gc=False):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None
    """JSON text; some servers send the arguments as an object."""


class _CallPiece(msgspec.Struct, gc=False):
    """A tool call, or a piece of one (calls stream interleaved, told apart by ``index``)."""

    index: int | None = None
    id: str | None = None
    function: _Function | None = None
    extra_content: dict[str, Any] | None = None


class _ContentPart(msgspec.Struct, gc=False):
    type: str | None = None
    text: Any = None
    """Read (as text) in ``text`` parts only: parts of other types are a server's own."""


class _Delta(msgspec.Struct, gc=False):
    """A choice's ``delta`` (streamed) or ``message`` (whole)."""

    content: str | list[_ContentPart] | None = None
    refusal: str | None = None
    tool_calls: list[_CallPiece] | None = None
    function_call: _Function | None = None
    """The deprecated single call, read as the call at index 0."""
    reasoning_content: str | None = None
    reasoning: str | None = None


class _Choice(msgspec.Struct, gc=False):
    index: int | None = None
    delta: _Delta | None = None
    message: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct, gc=False):
    cached_tokens: Any = None
    reasoning_tokens: Any = None


class _Usage(msgspec.Struct, gc=False):
    """Counts of any JSON type: read forgivingly (``wire.as_count``)."""

    prompt_tokens: Any = None
    completion_tokens: Any = None
    prompt_tokens_details: _Details | None = None
    completion_tokens_details: _Details | None = None
    prompt_cache_hit_tokens: Any = None


class _Chunk(msgspec.Struct, gc=False):
    """A streamed chunk, or a whole completion."""

    id: str | None = None
    model: str | None = None
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: Any = None
    message: Any = None
    """Beside ``error``, some servers' message of it."""


_CHUNK = Shape(_Chunk, "the chunk", renames={"function_call": "function"})
"""A chunk; the deprecated ``function_call`` is named ``function`` in errors, as a call's own ``function`` is."""
_USAGE = Shape(_Usage, "usage")


class ChatDecoder:
    """Chat Completions chunks (or one whole completion) to ``LlmEvent``s, for one response: a
    :class:`~tether.providers.decoding.Decoder`.

    Each chunk is read into the wire shapes above, so a field of the wrong JSON type is an ``InvalidResponse``
    naming it and nothing wrongly typed reaches an event. A tool call's ``extra_content`` (Gemini's
    OpenAI-compatible endpoint puts the call's thought signature there) is kept in the call's ``provider_data``
    and sent back unchanged (:func:`~tether.providers.openai_chat.encode_message`).
    """

    __slots__ = ("_calls", "_extra", "_finish", "_reasoning_apart", "_started", "_usage", "provider")

    def __init__(self, profile: Profile) -> None:
        self.provider = profile.name
        self._reasoning_apart = not profile.reasoning_in_completion
        self._started = False
        self._calls: dict[int, str] = {}
        self._extra: dict[str, Any] | None = None
        """Call id -> ``extra_content`` that arrived after the call had started (kept on the message); rare, so
        made when the first one comes."""
        self._finish: FinishReason | None = None
        self._usage = NO_USAGE

    def feed_json(self, text: str | bytes) -> list[LlmEvent]:
        """The events of one streamed chunk's JSON (or of a whole completion's)."""
        return self._read(_CHUNK.of_text(text, self.provider))

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed chunk, parsed (or of a whole completion, from a server that ignored
        streaming)."""
        return self._read(_CHUNK.of(data, self.provider))

    def whole_json(self, body: str | bytes) -> list[LlmEvent]:
        return self._whole(_CHUNK.of_text(body, self.provider, source="a body"))

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) completion, its close included; one without a finish reason
        (or without a first choice) is malformed (:func:`~tether.providers.decoding.unfinished`)."""
        return self._whole(_CHUNK.of(data, self.provider))

    def _whole(self, chunk: _Chunk) -> list[LlmEvent]:
        events = self._read(chunk)
        if self._finish is None:
            raise unfinished(self.provider, started=True, whole=True, missing="choices[0].finish_reason")
        return events + self.end()

    def end(self) -> list[LlmEvent]:
        """Close the open tool calls and the turn; a stream that stopped without finishing is an error."""
        if self._finish is None:
            raise unfinished(self.provider, started=self._started)
        out: list[LlmEvent] = [ToolCallEnd(call_id) for call_id in self._calls.values()]
        data = {"origin": self.provider, CALL_EXTRA: self._extra} if self._extra else None
        out.append(StreamEnd(self._finish, self._usage, data))
        return out

    def _read(self, chunk: _Chunk) -> list[LlmEvent]:
        name = self.provider
        if chunk.error and not chunk.choices:
            raise error_for_payload(name, {"error": chunk.error, "message": chunk.message})
        out: list[LlmEvent] = []
        if not self._started:
            self._started = True
            out.append(StreamStart(chunk.model or None, chunk.id or None))
        if chunk.usage is not None and chunk.usage != _NO_COUNTS:
            self._usage = usage_of(chunk.usage, reasoning_apart=self._reasoning_apart)
        for position, choice in enumerate(chunk.choices or ()):
            if not choice.index:  # the first choice (or the only one, numbered or not)
                delta, field = (choice.delta, "delta") if choice.delta is not None else (choice.message, "message")
                if delta is not None:
                    self._choice(delta, position, field, out)
                if choice.finish_reason:
                    self._finish = _FINISH.get(choice.finish_reason, "other")
        return out

    def _choice(self, delta: _Delta, choice: int, field: str, out: list[LlmEvent]) -> None:
        """The first choice's ``delta`` (or ``message``, named ``field``)."""
        for reasoning in (delta.reasoning_content, delta.reasoning):
            if reasoning:
                out.append(ThinkingDelta(reasoning))
        content = delta.content
        if isinstance(content, list):
            content = _content_text(content, self.provider, f"choices[{choice}].{field}.content")
        if content:
            out.append(TextDelta(content))
        if delta.refusal:
            out.append(TextDelta(delta.refusal, provider_data={"refusal": True}))
        for position, call in enumerate(delta.tool_calls or ()):
            self._tool_call(call, position, out)
        if delta.function_call is not None:  # the old single call
            self._tool_call(_CallPiece(index=0, function=delta.function_call), 0, out)

    def _tool_call(self, call: _CallPiece, position: int, out: list[LlmEvent]) -> None:
        """One tool call, or a piece of one."""
        given_id = call.id or ""
        index = call.index
        if index is None:  # whole calls (non-streamed answers, or servers that leave it out)
            index = self._index_of(given_id, position)
        function = call.function or _NO_FUNCTION
        arguments = function.arguments
        if type(arguments) is dict:  # a server that sends the arguments as an object, not as JSON text
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = self._calls.get(index)
        if call_id is None:
            call_id = given_id or f"call_{uuid.uuid4().hex[:24]}"
            self._calls[index] = call_id
            data = {"origin": self.provider, CALL_EXTRA: call.extra_content} if call.extra_content else None
            out.append(ToolCallStart(call_id, function.name or "", index, data))
        elif call.extra_content:
            if self._extra is None:
                self._extra = {}
            self._extra[call_id] = call.extra_content
        if arguments:
            out.append(ToolCallDelta(call_id, arguments))  # type: ignore[arg-type]

    def _index_of(self, call_id: str, position: int) -> int:
        """A call without an ``index``: the one with its id, a new one if the id is new, else its position."""
        if call_id:
            if call_id not in self._calls.values():  # the common case (every whole call), looked for in C
                return len(self._calls)
            return next(index for index, known_id in self._calls.items() if known_id == call_id)
        return position


_NO_COUNTS = _Usage()
_NO_FUNCTION = _Function()


def _content_text(content: list[_ContentPart], provider: str, where: str) -> str:
    """A message's ``content`` sent as a list of parts: its ``text`` parts are the text; parts of other types
    (images, a server's own thinking parts) carry no answer text."""
    texts = []
    for position, part in enumerate(content):
        if part.type == "text":
            if part.text is not None and type(part.text) is not str:
                raise malformed(provider, f"{where}[{position}].text", part.text)
            texts.append(part.text or "")
    return "".join(texts)


def parse_usage(usage: dict[str, Any], provider: str = "openai", *, reasoning_apart: bool = False) -> Usage:
    """Chat Completions usage from its JSON; a details field that is not an object is ``InvalidResponse``."""
    return usage_of(_USAGE.of(usage, provider, "usage"), reasoning_apart=reasoning_apart)


def usage_of(usage: _Usage, *, reasoning_apart: bool = False) -> Usage:
    """Chat Completions usage; cached prompt tokens (OpenAI's or DeepSeek's field) counted apart. Counts are
    read forgivingly (:func:`~tether.providers.wire.as_count`). OpenAI's ``completion_tokens`` include the
    reasoning tokens; a server whose count leaves them out (``reasoning_apart``: xAI) has them added, so that
    the output tokens are every token generated and billed, whichever server counted them."""
    prompt = as_count(usage.prompt_tokens)
    cached = reasoning = 0
    if usage.prompt_tokens_details is not None:
        cached = as_count(usage.prompt_tokens_details.cached_tokens)
    if not cached:
        cached = as_count(usage.prompt_cache_hit_tokens)
    if usage.completion_tokens_details is not None:
        reasoning = as_count(usage.completion_tokens_details.reasoning_tokens)
    output = as_count(usage.completion_tokens) + (reasoning if reasoning_apart else 0)
    # input, output, cache read, cache write, reasoning: positional, as a usage is made for every answer
    return Usage(max(prompt - cached, 0), output, cached, 0, reasoning)
