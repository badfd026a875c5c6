"""OpenAI Chat Completions, spoken over plain HTTP, for OpenAI and every server that imitates it.

Requests are built from tether's messages; answers, streamed or not, are read by one decoder into the same
``LlmEvent``s: text, reasoning (``reasoning_content`` as DeepSeek, vLLM and llama.cpp send it, ``reasoning``
as Ollama does) as thinking, refusals as text marked ``{"refusal": true}``, tool calls assembled by their
``index`` (several may stream interleaved; a call without an ``id`` gets one; the deprecated single
``function_call`` is read as the call at index 0), the finish reason and usage.
What differs between servers is a :class:`~tether.providers.registry.Profile`, not a subclass; among it, the
tool choices a server honours (:func:`tool_offer`): what it cannot be told is kept another way (``"none"`` by
offering no tools) or refused, never sent to be silently ignored.

An answer is read field by field with the typed readers of :mod:`tether.providers.wire`: a field of the wrong
JSON type (at any depth) is ``InvalidResponse`` naming it, and no event ever carries a value of the wrong
Python type. ``content`` may also be a list of parts, as some servers send it: its ``text`` parts are the
text. Usage counts are read forgivingly. A tool call's ``extra_content`` (where Gemini's OpenAI-compatible
endpoint puts the call's thought signature, streamed or not) is kept in the call's ``provider_data`` as
``{"origin": <profile name>, "extra_content": {...}}`` and sent back unchanged on later requests to a server
of the same profile, which Gemini 3 requires to continue after a tool call.
"""

from __future__ import annotations

import json
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

from tether import jsoncodec
from tether.errors import ConfigInvalid, InvalidResponse, TransportError
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
from tether.messages import Message, ToolCall, ToolResult
from tether.providers.base import ForceTool, ModelInfo, Request, ToolChoice, ToolDefinition, merge_extra
from tether.providers.http import HttpClient, ResponseLimits, RetryPolicy, Secret, error_for_payload
from tether.providers.keys import missing_key, read_key
from tether.providers.registry import PROFILES, Profile
from tether.providers.windows import checked_window, context_window_for
from tether.providers.wire import as_count, as_list, as_object, as_text, decoded, malformed
from tether.usage import NO_USAGE, Usage

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
CANNOT_CALL_TOOLS = frozenset({"o1-mini", "o1-preview"})
"""Models that reject tool definitions outright."""


class OpenAIChatProvider:
    """A model behind a Chat Completions endpoint (``POST {base_url}/chat/completions``)."""

    def __init__(
        self,
        model: str,
        *,
        profile: Profile = PROFILES["openai"],
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        response_limits: ResponseLimits | None = None,
        headers: dict[str, str] | None = None,
        context_window: int | None = None,
    ) -> None:
        """
        Args:
            model: the model id the server knows.
            profile: the server's facts (``PROFILES[...]``); OpenAI's by default.
            base_url: where the API is, up to and including ``/v1``; the profile's when not given.
            api_key: the key; otherwise read from the profile's environment variable.
            stream: stream answers (the default), or ask for whole answers.
            retry: how failed requests are retried.
            response_limits: the most of an answer read (``ResponseLimits``); the defaults when not given.
            headers: extra headers sent with every request.
            context_window: the model's context window in tokens; by default the known window of a hosted
                model (``tether.providers.windows``), none for a local server's (it is the server's setting).
        """
        url = base_url or profile.base_url
        if not url:
            raise ConfigInvalid(
                f"'{profile.name}:{model}' needs a base_url, for example "
                f"Agent('{profile.name}:{model}', base_url='http://localhost:8000/v1')"
            )
        key = read_key(profile.name, api_key)
        if profile.requires_key and not key:
            raise ConfigInvalid(missing_key(profile.name, model))
        self.profile = profile
        self.streaming = stream
        self.info = ModelInfo(
            profile.name,
            model,
            supports_tools=profile.supports_tools and model not in CANNOT_CALL_TOOLS,
            supports_json_schema=profile.json_schema,
            tool_choices=honoured_choices(profile),
            context_window=checked_window(context_window, f"'{profile.name}:{model}'")
            or context_window_for(profile.name, model),
        )
        self._client = HttpClient(
            url,
            provider=profile.name,
            api_key=Secret(key) if key else None,
            headers=headers,
            retry=retry,
            limits=response_limits,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatProvider({self.info.model_string!r}, base_url={self._client.base_url!r})"

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        body = self.request_payload(request)
        decoder = ChunkDecoder(self.profile)
        client = self._client
        if not self.streaming:
            data = await client.post_json(
                "/chat/completions",
                body,
                timeout=request.timeout,
                deadline=request.deadline,
                on_retry=request.on_retry,
            )
            for event in decoded(decoder.completion, data, self.profile.name):
                yield event
            return
        events = client.stream_decoded(
            "/chat/completions",
            body,
            decode=decoder.chunk,
            end=decoder.end,
            timeout=request.timeout,
            deadline=request.deadline,
            end_marker="[DONE]",
            on_retry=request.on_retry,
        )
        try:
            async for event in events:
                yield event
        finally:  # the response goes back to the pool (or is closed) however the consumer leaves
            await events.aclose()

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
        for message in request.messages:
            messages += encode_message(message, self.profile.name)
        return {"model": self.info.name, "messages": messages, **self._options(request)}

    def request_payload(self, request: Request) -> bytes:
        """``request_body`` encoded, built from each message's cached JSON: the cost of a request grows with
        the new messages, not with the whole history re-encoded every turn."""
        head = [_dumps({"role": "system", "content": request.system})] if request.system else []
        messages = ",".join(head + [encoded_json(message, self.profile.name) for message in request.messages])
        options = _dumps({"model": self.info.name, **self._options(request, tools_slot=True)})
        slot = _TOOLS_SLOT_JSON
        if slot in options:
            options = options.replace(slot, tools_json(tool_offer(request, self.profile)[0]), 1)
        return f'{{"messages":[{messages}],{options[1:]}'.encode()

    def _options(self, request: Request, *, tools_slot: bool = False) -> dict[str, Any]:
        """Everything in the body but the messages; with ``tools_slot``, the tools are a placeholder for
        :func:`tools_json` to fill in the encoded body."""
        profile = self.profile
        body: dict[str, Any] = {"stream": self.streaming}
        if self.streaming and profile.stream_options:
            body["stream_options"] = {"include_usage": True}
        tools, choice = tool_offer(request, profile)
        if tools:
            body["tools"] = _TOOLS_SLOT if tools_slot else _tool_items(tools)
            if choice is not None:
                body["tool_choice"] = choice
            if request.parallel_tool_calls is not None and profile.parallel_tool_calls:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.json_schema is not None and profile.json_schema:
            schema = {"name": "answer", "schema": request.json_schema}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        settings = request.settings
        if settings.max_tokens is not None:
            body[profile.max_tokens_field] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        merge_extra(body, settings.extra)
        if request.tools and request.tool_choice == "none":  # tools off: an extra default must not undo it
            if "none" in profile.tool_choices:
                body["tool_choice"] = "none"
            else:
                for key in ("tools", "tool_choice", "parallel_tool_calls"):
                    body.pop(key, None)
        return body


CALL_EXTRA = "extra_content"
"""The key, in a tool call's ``provider_data`` (or, keyed by call id, in its message's), of the call's
``extra_content`` as the server sent it; Gemini's OpenAI-compatible endpoint carries the call's thought
signature there (``{"google": {"thought_signature": ...}}``) and refuses a follow-up without it."""


class _Encoded(weakref.ref):  # type: ignore[type-arg]
    """A message's encoded JSON, kept as long as the message lives: one object per message (the reference
    itself), so that a long history does not carry a cache entry, a callback and a reference for each."""

    __slots__ = ("key", "origin", "text")
    key: int
    origin: str
    text: str


def _evict(entry: _Encoded) -> None:
    """The message died: forget its JSON (unless its id already holds a newer message's)."""
    if _encoded.get(entry.key) is entry:
        del _encoded[entry.key]


_encoded: dict[int, _Encoded] = {}


def encoded_json(message: Message, origin: str = "") -> str:
    """The message's Chat Completions messages as JSON array items, encoded once per message object (and per
    provider: what goes back to one server only may differ)."""
    key = id(message)
    cached = _encoded.get(key)
    if cached is not None and cached() is message and cached.origin == origin:
        return cached.text
    text = ",".join(_dumps(item) for item in encode_message(message, origin))
    entry = _Encoded(message, _evict)
    entry.key, entry.origin, entry.text = key, origin, text
    _encoded[key] = entry
    return text


def _dumps(value: Any) -> str:
    return jsoncodec.dumps(value)


def _tool_items(tools: tuple[ToolDefinition, ...]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


_tool_texts: dict[int, tuple[dict[str, Any], str, str, str]] = {}
"""Per tool schema (by identity): the schema, the tool's name and description, and the tool as JSON."""
MAX_TOOL_TEXTS = 1024
"""Tools kept encoded; past this many (tools made afresh all the time), the cache starts over."""


def tools_json(tools: tuple[ToolDefinition, ...]) -> str:
    """The ``tools`` of a body as JSON, each tool encoded once: every run offers the same tools every turn
    (definitions made afresh per run, but around the tool's own schema object), and their schemas are often
    the largest part of a body after the history. Schemas are read-only once a tool is made."""
    texts = []
    for t in tools:
        parameters = t.parameters
        cached = _tool_texts.get(id(parameters))
        if cached is None or cached[0] is not parameters or cached[1] != t.name or cached[2] != t.description:
            if len(_tool_texts) >= MAX_TOOL_TEXTS:
                _tool_texts.clear()
            cached = _tool_texts[id(parameters)] = (parameters, t.name, t.description, _dumps(_tool_items((t,))[0]))
        texts.append(cached[3])
    return f"[{','.join(texts)}]"


_TOOLS_SLOT = "\x00tools\x00"
"""Stands for the tools in the options of an encoded body; no JSON a caller builds holds it (a NUL)."""
_TOOLS_SLOT_JSON = '"\\u0000tools\\u0000"'
"""How either JSON backend writes it (a NUL is escaped)."""


def encode_message(message: Message, origin: str = "") -> list[dict[str, Any]]:
    """One tether message as Chat Completions messages (a tool message becomes one per result). ``origin`` is
    the profile name of the server it goes to: a tool call's ``extra_content`` goes back to that server only."""
    if message.role == "tool":
        return [
            {"role": "tool", "tool_call_id": part.call_id, "content": part.content}
            for part in message.parts
            if type(part) is ToolResult
        ]
    text = message.plain_text
    if message.role != "assistant":
        return [{"role": message.role, "content": text}]
    encoded: dict[str, Any] = {"role": "assistant", "content": text or None}
    calls = [part for part in message.parts if type(part) is ToolCall]
    if calls:
        late = _own(message.provider_data, origin).get(CALL_EXTRA)
        encoded["tool_calls"] = [_call(c, origin, late if isinstance(late, dict) else {}) for c in calls]
    return [encoded]


def _own(provider_data: dict[str, Any] | None, origin: str) -> dict[str, Any]:
    """``provider_data`` written by the provider named ``origin``, else nothing."""
    if origin and provider_data and provider_data.get("origin") == origin:
        return provider_data
    return {}


def _call(call: ToolCall, origin: str, late: dict[str, Any]) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": _arguments_text(call)},
    }
    extra = _own(call.provider_data, origin).get(CALL_EXTRA) or late.get(call.id)
    if isinstance(extra, dict) and extra:
        encoded[CALL_EXTRA] = extra
    return encoded


def encode_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    """``tool_choice`` as the Chat Completions API names it."""
    if isinstance(choice, ForceTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def tool_offer(request: Request, profile: Profile) -> tuple[tuple[ToolDefinition, ...], str | dict[str, Any] | None]:
    """The tools to send and the ``tool_choice`` to send with them (``None``: the field is left out), as far as
    the server honours it (``Profile.tool_choices``).

    ``"none"`` a server cannot be told is kept by offering no tools; a forced tool on a server that knows
    ``"required"`` but not named tools is that tool alone, required. Anything else it cannot honour raises
    ``ConfigInvalid`` rather than be silently ignored (the loop refuses it before a run starts).
    """
    choice, accepted = request.tool_choice, profile.tool_choices
    if isinstance(choice, ForceTool):
        if "function" in accepted:
            return request.tools, encode_tool_choice(choice)
        if "required" in accepted:
            return tuple(t for t in request.tools if t.name == choice.name), "required"
    elif choice in accepted:
        return request.tools, choice
    elif choice == "none":
        return (), None
    elif choice == "auto":
        return request.tools, None
    asked = f"the tool {choice.name!r}" if isinstance(choice, ForceTool) else f"tool_choice={choice!r}"
    raise ConfigInvalid(
        f"{profile.name} servers cannot be made to call a tool ({asked}): the tool choices they honour are "
        f"{', '.join(sorted(accepted | {'none'}))}"
    )


def honoured_choices(profile: Profile) -> frozenset[str]:
    """``ModelInfo.tool_choices`` for a server of ``profile``: what :func:`tool_offer` can keep."""
    forced = {"tool"} if {"function", "required"} & profile.tool_choices else set()
    required = {"required"} & profile.tool_choices
    return frozenset({"auto", "none", *required, *forced})


def _arguments_text(call: ToolCall) -> str:
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments or {}, ensure_ascii=False)


class ChunkDecoder:
    """Chat Completions chunks (or one whole completion) to ``LlmEvent``s, for one response.

    Every field is read through the typed readers of :mod:`tether.providers.wire`: a field of the wrong JSON
    type is an ``InvalidResponse`` naming it, so nothing wrongly typed reaches an event. A tool call's
    ``extra_content`` (Gemini's OpenAI-compatible endpoint puts the call's thought signature there) is kept in
    the call's ``provider_data`` and sent back unchanged (:func:`encode_message`).
    """

    __slots__ = ("_calls", "_extra", "_finish", "_reasoning_fields", "_started", "_usage", "provider")

    def __init__(self, profile: Profile) -> None:
        self.provider = profile.name
        self._reasoning_fields = profile.reasoning_fields
        self._started = False
        self._calls: dict[int, str] = {}
        self._extra: dict[str, Any] = {}
        """Call id -> ``extra_content`` that arrived after the call had started (kept on the message)."""
        self._finish: FinishReason | None = None
        self._usage = NO_USAGE

    def chunk(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed chunk."""
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
            out.append(StreamStart(model=model or None, response_id=response_id or None))
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

    def completion(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) completion. A whole answer cannot have been cut off on the way,
        so one without a finish reason (or without a first choice) is malformed, not a broken connection."""
        events = self.chunk(data)
        if self._finish is None:
            raise InvalidResponse(
                f"{self.provider} sent a malformed answer: a completion without choices[0].finish_reason",
                details={"field": "choices[0].finish_reason"},
            )
        return events + self.end()

    def end(self) -> list[LlmEvent]:
        """Close the open tool calls and the turn; a stream that stopped without finishing is an error."""
        if self._finish is None:
            if not self._started:
                raise InvalidResponse(f"{self.provider} ended the stream without sending anything")
            raise TransportError(f"{self.provider} ended the stream before finishing its answer")
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
                self._tool_call(call, position, choice, f"{field}.tool_calls[{position}]", out)
        legacy = delta.get("function_call")
        if legacy is not None and (legacy := as_object(legacy, name, f"choices[{choice}].{field}.function_call")):
            self._tool_call({"index": 0, "function": legacy}, 0, choice, field, out)  # the deprecated single call
        if finish:
            self._finish = _FINISH.get(finish, "other")

    def _tool_call(self, call: dict[str, Any], position: int, choice: int, where: str, out: list[LlmEvent]) -> None:
        """One tool call, or a piece of one (``choices[choice].where`` names it in errors)."""
        name = self.provider
        given_id = call.get("id")
        if type(given_id) is not str:
            given_id = as_text(given_id, name, f"choices[{choice}].{where}.id")
        index = call.get("index")
        if index is None:  # whole calls (non-streamed answers, or servers that leave it out)
            index = self._index_of(given_id, position)
        elif type(index) is not int:
            raise malformed(name, f"choices[{choice}].{where}.index", index)
        function = call.get("function")
        if type(function) is not dict:
            function = as_object(function, name, f"choices[{choice}].{where}.function")
        tool_name = function.get("name")
        if type(tool_name) is not str:
            tool_name = as_text(tool_name, name, f"choices[{choice}].{where}.function.name")
        arguments = function.get("arguments")
        if type(arguments) is dict:  # a server that sends the arguments as an object, not as JSON text
            arguments = json.dumps(arguments, ensure_ascii=False)
        if type(arguments) is not str:
            arguments = as_text(arguments, name, f"choices[{choice}].{where}.function.arguments")
        extra = call.get("extra_content")
        if extra is not None:
            extra = as_object(extra, name, f"choices[{choice}].{where}.extra_content")
        call_id = self._calls.get(index)
        if call_id is None:
            call_id = given_id or f"call_{uuid.uuid4().hex[:24]}"
            self._calls[index] = call_id
            data = {"origin": name, CALL_EXTRA: extra} if extra else None
            out.append(ToolCallStart(call_id, tool_name, index, data))
        elif extra:
            self._extra[call_id] = extra
        if arguments:
            out.append(ToolCallDelta(call_id, arguments))

    def _index_of(self, call_id: str, position: int) -> int:
        """A call without an ``index``: the one with its id, a new one if the id is new, else its position."""
        if call_id:
            known = [index for index, known_id in self._calls.items() if known_id == call_id]
            return known[0] if known else len(self._calls)
        return position


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
    ``InvalidResponse``."""
    prompt = as_count(usage.get("prompt_tokens"))
    prompt_details = as_object(usage.get("prompt_tokens_details"), provider, "usage.prompt_tokens_details")
    cached = as_count(prompt_details.get("cached_tokens")) or as_count(usage.get("prompt_cache_hit_tokens"))
    output_details = as_object(usage.get("completion_tokens_details"), provider, "usage.completion_tokens_details")
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=as_count(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=as_count(output_details.get("reasoning_tokens")),
    )


def from_model_name(prefix: str, name: str, **options: Any) -> OpenAIChatProvider:
    """The builder behind ``openai:``, ``ollama:``, ``vllm:``, ... model strings."""
    return OpenAIChatProvider(name, profile=PROFILES[prefix], **{k: v for k, v in options.items() if v is not None})
