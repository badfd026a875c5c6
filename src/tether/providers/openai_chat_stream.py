"""OpenAI Chat Completions answers, streamed or whole, read into tether's ``LlmEvent``s.

One decoder (:class:`ChatDecoder`) reads streamed chunks and whole completions into the same events: text,
reasoning (``reasoning_content`` as DeepSeek, vLLM and llama.cpp send it, ``reasoning`` as Ollama does; the
fields a server uses are its :class:`~tether.providers.registry.Profile`'s) as thinking, refusals as text
marked ``{"refusal": true}``, tool calls assembled by their ``index`` (several may stream interleaved; a call
without an ``id`` gets one; the deprecated single ``function_call`` is read as the call at index 0), the finish
reason and usage.

An answer is read field by field with the typed readers of :mod:`tether.providers.wire`: a field of the wrong
JSON type (at any depth) is ``InvalidResponse`` naming it, and no event ever carries a value of the wrong
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
from tether.providers.http import error_for_payload
from tether.providers.registry import Profile
from tether.providers.wire import as_count, as_list, as_object, as_text, malformed
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


class ChatDecoder:
    """Chat Completions chunks (or one whole completion) to ``LlmEvent``s, for one response: a
    :class:`~tether.providers.decoding.Decoder`.

    Every field is read through the typed readers of :mod:`tether.providers.wire`: a field of the wrong JSON
    type is an ``InvalidResponse`` naming it, so nothing wrongly typed reaches an event. A tool call's
    ``extra_content`` (Gemini's OpenAI-compatible endpoint puts the call's thought signature there) is kept in
    the call's ``provider_data`` and sent back unchanged (:func:`~tether.providers.openai_chat.encode_message`).
    """

    __slots__ = ("_calls", "_extra", "_finish", "_reasoning_fields", "_started", "_usage", "provider")

    def __init__(self, profile: Profile) -> None:
        self.provider = profile.name
        self._reasoning_fields = profile.reasoning_fields
        self._started = False
        self._calls: dict[int, str] = {}
        self._extra: dict[str, Any] | None = None
        """Call id -> ``extra_content`` that arrived after the call had started (kept on the message); rare, so
        made when the first one comes."""
        self._finish: FinishReason | None = None
        self._usage = NO_USAGE

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed chunk (or of a whole completion, from a server that ignored streaming)."""
        name = self.provider
        if type(data) is not dict:
            raise malformed(name, "the chunk", data)
        if data.get("error") and not data.get("choices"):
            raise error_for_payload(name, data)
        out: list[LlmEvent] = []
        if not self._started:
            self._started = True
            model = as_text(data.get("model"), name, "model")
            response_id = as_text(data.get("id"), name, "id")
            out.append(StreamStart(model or None, response_id or None))
        if (usage := data.get("usage")) is not None and (usage := as_object(usage, name, "usage")):
            self._usage = parse_usage(usage, name)
        choices = data.get("choices")
        if type(choices) is not list:
            choices = as_list(choices, name, "choices")
        for position, choice in enumerate(choices):
            if type(choice) is not dict:
                choice = as_object(choice, name, f"choices[{position}]")
            index = choice.get("index", 0)
            if type(index) is not int and index is not None:
                raise malformed(name, f"choices[{position}].index", index)
            if not index:
                field = "delta" if "delta" in choice else "message"
                delta = choice.get(field)
                if type(delta) is not dict:
                    delta = as_object(delta, name, f"choices[{position}].{field}")
                finish = choice.get("finish_reason")
                if finish is not None and type(finish) is not str:
                    raise malformed(name, f"choices[{position}].finish_reason", finish)
                self._choice(delta, finish, position, field, out)
        return out

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) completion, its close included; one without a finish reason
        (or without a first choice) is malformed (:func:`~tether.providers.decoding.unfinished`)."""
        events = self.feed(data)
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

    def _choice(self, delta: dict[str, Any], finish: str | None, choice: int, field: str, out: list[LlmEvent]) -> None:
        """The first choice's ``delta`` (or ``message``, named ``field``); a field's path in an error message is
        made only when it is needed."""
        name = self.provider
        for reasoning_field in self._reasoning_fields:
            reasoning = delta.get(reasoning_field)
            if reasoning is not None and (
                reasoning := as_text(reasoning, name, f"choices[{choice}].{field}.{reasoning_field}")
            ):
                out.append(ThinkingDelta(reasoning))
        content = delta.get("content")
        if type(content) is not str and content is not None:
            content = _content_text(content, name, f"choices[{choice}].{field}.content")
        if content:
            out.append(TextDelta(content))
        refusal = delta.get("refusal")
        if refusal is not None and (refusal := as_text(refusal, name, f"choices[{choice}].{field}.refusal")):
            out.append(TextDelta(refusal, provider_data={"refusal": True}))
        if (calls := delta.get("tool_calls")) is not None:
            if type(calls) is not list:
                calls = as_list(calls, name, f"choices[{choice}].{field}.tool_calls")
            for position, call in enumerate(calls):
                if type(call) is not dict:
                    call = as_object(call, name, f"choices[{choice}].{field}.tool_calls[{position}]")
                self._tool_call(call, position, choice, field, out)
        legacy = delta.get("function_call")
        if legacy is not None and (legacy := as_object(legacy, name, f"choices[{choice}].{field}.function_call")):
            self._tool_call({"index": 0, "function": legacy}, 0, choice, field, out, legacy=True)  # the old single call
        if finish:
            self._finish = _FINISH.get(finish, "other")

    def _tool_call(
        self, call: dict[str, Any], position: int, choice: int, field: str, out: list[LlmEvent], legacy: bool = False
    ) -> None:
        """One tool call, or a piece of one: ``choices[choice].field.tool_calls[position]`` (``legacy``: the
        deprecated ``choices[choice].field.function_call``), a path made only for an error message."""
        name = self.provider
        given_id = call.get("id")
        if type(given_id) is not str:
            given_id = as_text(given_id, name, _call_path(choice, field, position, legacy, "id"))
        index = call.get("index")
        if index is None:  # whole calls (non-streamed answers, or servers that leave it out)
            index = self._index_of(given_id, position)
        elif type(index) is not int:
            raise malformed(name, _call_path(choice, field, position, legacy, "index"), index)
        function = call.get("function")
        if type(function) is not dict:
            function = as_object(function, name, _call_path(choice, field, position, legacy, "function"))
        tool_name = function.get("name")
        if type(tool_name) is not str:
            tool_name = as_text(tool_name, name, _call_path(choice, field, position, legacy, "function.name"))
        arguments = function.get("arguments")
        if type(arguments) is dict:  # a server that sends the arguments as an object, not as JSON text
            arguments = json.dumps(arguments, ensure_ascii=False)
        if type(arguments) is not str:
            arguments = as_text(arguments, name, _call_path(choice, field, position, legacy, "function.arguments"))
        extra = call.get("extra_content")
        if extra is not None:
            extra = as_object(extra, name, _call_path(choice, field, position, legacy, "extra_content"))
        call_id = self._calls.get(index)
        if call_id is None:
            call_id = given_id or f"call_{uuid.uuid4().hex[:24]}"
            self._calls[index] = call_id
            data = {"origin": name, CALL_EXTRA: extra} if extra else None
            out.append(ToolCallStart(call_id, tool_name, index, data))
        elif extra:
            if self._extra is None:
                self._extra = {}
            self._extra[call_id] = extra
        if arguments:
            out.append(ToolCallDelta(call_id, arguments))

    def _index_of(self, call_id: str, position: int) -> int:
        """A call without an ``index``: the one with its id, a new one if the id is new, else its position."""
        if call_id:
            if call_id not in self._calls.values():  # the common case (every whole call), looked for in C
                return len(self._calls)
            return next(index for index, known_id in self._calls.items() if known_id == call_id)
        return position


def _call_path(choice: int, field: str, position: int, legacy: bool, key: str) -> str:
    """Where a tool call's ``key`` is in a chunk, for an error message."""
    call = f"choices[{choice}].{field}" if legacy else f"choices[{choice}].{field}.tool_calls[{position}]"
    return f"{call}.{key}"


def _content_text(content: Any, provider: str, where: str) -> str:
    """A message's ``content``: a string, or (as some servers send it) a list of parts whose ``text`` parts
    are the text; parts of other types (images, a server's own thinking parts) carry no answer text."""
    if type(content) is not list:
        return as_text(content, provider, where)
    texts = []
    for position, raw in enumerate(content):
        part = as_object(raw, provider, f"{where}[{position}]")
        if as_text(part.get("type"), provider, f"{where}[{position}].type") == "text":
            texts.append(as_text(part.get("text"), provider, f"{where}[{position}].text"))
    return "".join(texts)


def parse_usage(usage: dict[str, Any], provider: str = "openai") -> Usage:
    """Chat Completions usage; cached prompt tokens (OpenAI's or DeepSeek's field) counted apart. Counts are
    read forgivingly (:func:`~tether.providers.wire.as_count`); a details field that is not an object is
    ``InvalidResponse``. The details are read only where they are sent (most servers send none)."""
    prompt = as_count(usage.get("prompt_tokens"))
    cached = reasoning = 0
    if (details := usage.get("prompt_tokens_details")) is not None:
        cached = as_count(as_object(details, provider, "usage.prompt_tokens_details").get("cached_tokens"))
    if not cached and "prompt_cache_hit_tokens" in usage:
        cached = as_count(usage["prompt_cache_hit_tokens"])
    if (details := usage.get("completion_tokens_details")) is not None:
        details = as_object(details, provider, "usage.completion_tokens_details")
        reasoning = as_count(details.get("reasoning_tokens"))
    # input, output, cache read, cache write, reasoning: positional, as a usage is made for every answer
    return Usage(max(prompt - cached, 0), as_count(usage.get("completion_tokens")), cached, 0, reasoning)
