"""OpenAI Chat Completions, spoken over plain HTTP, for OpenAI and every server that imitates it.

Requests are built from tether's messages; answers, streamed or not, are read by one decoder into the same
``LlmEvent``s: text, reasoning (``reasoning_content`` as DeepSeek, vLLM and llama.cpp send it, ``reasoning``
as Ollama does) as thinking, refusals as text marked ``{"refusal": true}``, tool calls assembled by their
``index`` (several may stream interleaved; a call without an ``id`` gets one), the finish reason and usage.
What differs between servers is a :class:`~tether.providers.registry.Profile`, not a subclass.
"""

from __future__ import annotations

import json
import os
import uuid
import weakref
from collections.abc import AsyncIterator
from typing import Any

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
from tether.providers.base import ForceTool, ModelInfo, Request, ToolChoice, merge_extra
from tether.providers.http import HttpClient, ResponseLimits, RetryPolicy, Secret, decode_events, error_for_payload
from tether.providers.registry import PROFILES, Profile
from tether.providers.wire import decoded
from tether.usage import Usage

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
        """
        url = base_url or profile.base_url
        if not url:
            raise ConfigInvalid(
                f"'{profile.name}:{model}' needs a base_url, for example "
                f"Agent('{profile.name}:{model}', base_url='http://localhost:8000/v1')"
            )
        key = api_key or (os.environ.get(profile.api_key_env) if profile.api_key_env else None)
        if profile.requires_key and not key:
            raise ConfigInvalid(
                f"'{profile.name}:{model}' needs an API key: set {profile.api_key_env} or pass api_key= to Agent"
            )
        self.profile = profile
        self.streaming = stream
        self.info = ModelInfo(
            profile.name,
            model,
            supports_tools=profile.supports_tools and model not in CANNOT_CALL_TOOLS,
            supports_json_schema=profile.json_schema,
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
            data = await client.post_json("/chat/completions", body, timeout=request.timeout, deadline=request.deadline)
            for event in decoded(decoder.completion, data, self.profile.name):
                yield event
            return
        events = client.stream_events(
            "/chat/completions", body, timeout=request.timeout, deadline=request.deadline, end_marker="[DONE]"
        )
        async for event in decode_events(events, decoder.chunk, decoder.end, self.profile.name):
            yield event

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
        for message in request.messages:
            messages += encode_message(message)
        return {"model": self.info.name, "messages": messages, **self._options(request)}

    def request_payload(self, request: Request) -> bytes:
        """``request_body`` encoded, built from each message's cached JSON: the cost of a request grows with
        the new messages, not with the whole history re-encoded every turn."""
        head = [_dumps({"role": "system", "content": request.system})] if request.system else []
        messages = ",".join(head + [encoded_json(message) for message in request.messages])
        options = _dumps({"model": self.info.name, **self._options(request)})
        return f'{{"messages":[{messages}],{options[1:]}'.encode()

    def _options(self, request: Request) -> dict[str, Any]:
        """Everything in the body but the messages."""
        profile = self.profile
        body: dict[str, Any] = {"stream": self.streaming}
        if self.streaming and profile.stream_options:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
            body["tool_choice"] = encode_tool_choice(request.tool_choice)
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
        if request.tools and request.tool_choice == "none":
            body["tool_choice"] = "none"  # the loop's tools-off call: an extra default must not undo it
        return body


_encoded: dict[int, tuple[weakref.ref[Message], str]] = {}


def encoded_json(message: Message) -> str:
    """The message's Chat Completions messages as JSON array items, encoded once per message object."""
    key = id(message)
    cached = _encoded.get(key)
    if cached is not None and cached[0]() is message:
        return cached[1]
    text = ",".join(_dumps(item) for item in encode_message(message))
    _encoded[key] = (weakref.ref(message, lambda _, key=key: _encoded.pop(key, None)), text)  # type: ignore[misc]
    return text


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_message(message: Message) -> list[dict[str, Any]]:
    """One tether message as Chat Completions messages (a tool message becomes one per result)."""
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
        encoded["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments_text(c)}}
            for c in calls
        ]
    return [encoded]


def encode_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ForceTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _arguments_text(call: ToolCall) -> str:
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments or {}, ensure_ascii=False)


class ChunkDecoder:
    """Chat Completions chunks (or one whole completion) to ``LlmEvent``s, for one response."""

    __slots__ = ("_calls", "_finish", "_reasoning_fields", "_started", "_usage", "provider")

    def __init__(self, profile: Profile) -> None:
        self.provider = profile.name
        self._reasoning_fields = profile.reasoning_fields
        self._started = False
        self._calls: dict[int, str] = {}
        self._finish: FinishReason | None = None
        self._usage = Usage()

    def chunk(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed chunk."""
        if not isinstance(data, dict):
            raise InvalidResponse(f"{self.provider} sent a chunk that is not a JSON object: {str(data)[:200]}")
        if data.get("error") and not data.get("choices"):
            raise error_for_payload(self.provider, data)
        out: list[LlmEvent] = []
        if not self._started:
            self._started = True
            out.append(StreamStart(model=data.get("model"), response_id=data.get("id")))
        if usage := data.get("usage"):
            self._usage = parse_usage(usage)
        for choice in data.get("choices") or ():
            if choice.get("index", 0) == 0:
                self._choice(choice.get("delta") or choice.get("message") or {}, choice.get("finish_reason"), out)
        return out

    def completion(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) completion."""
        return self.chunk(data) + self.end()

    def end(self) -> list[LlmEvent]:
        """Close the open tool calls and the turn; a stream that stopped without finishing is an error."""
        if self._finish is None:
            if not self._started:
                raise InvalidResponse(f"{self.provider} ended the stream without sending anything")
            raise TransportError(f"{self.provider} ended the stream before finishing its answer")
        out: list[LlmEvent] = [ToolCallEnd(call_id) for call_id in self._calls.values()]
        out.append(StreamEnd(self._finish, self._usage))
        return out

    def _choice(self, delta: dict[str, Any], finish: str | None, out: list[LlmEvent]) -> None:
        for field in self._reasoning_fields:
            if reasoning := delta.get(field):
                out.append(ThinkingDelta(reasoning))
        if content := delta.get("content"):
            out.append(TextDelta(content))
        if refusal := delta.get("refusal"):
            out.append(TextDelta(refusal, provider_data={"refusal": True}))
        for position, call in enumerate(delta.get("tool_calls") or ()):
            self._tool_call(call, position, out)
        if finish:
            self._finish = _FINISH.get(finish, "other")

    def _tool_call(self, call: dict[str, Any], position: int, out: list[LlmEvent]) -> None:
        index = call.get("index")
        if index is None:  # whole calls (non-streamed answers, or servers that leave it out)
            index = self._index_of(call.get("id"), position)
        function = call.get("function") or {}
        call_id = self._calls.get(index)
        if call_id is None:
            call_id = call.get("id") or f"call_{uuid.uuid4().hex[:24]}"
            self._calls[index] = call_id
            out.append(ToolCallStart(call_id, function.get("name") or "", index))
        arguments = function.get("arguments")
        if arguments:
            text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            out.append(ToolCallDelta(call_id, text))

    def _index_of(self, call_id: str | None, position: int) -> int:
        """A call without an ``index``: the one with its id, a new one if the id is new, else its position."""
        if call_id:
            known = [index for index, known_id in self._calls.items() if known_id == call_id]
            return known[0] if known else len(self._calls)
        return position


def parse_usage(usage: dict[str, Any]) -> Usage:
    """Chat Completions usage; cached prompt tokens (OpenAI's or DeepSeek's field) counted apart."""
    prompt = usage.get("prompt_tokens") or 0
    cached = (
        (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or usage.get("prompt_cache_hit_tokens") or 0
    )
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=usage.get("completion_tokens") or 0,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )


def from_model_name(prefix: str, name: str, **options: Any) -> OpenAIChatProvider:
    """The builder behind ``openai:``, ``ollama:``, ``vllm:``, ... model strings."""
    return OpenAIChatProvider(name, profile=PROFILES[prefix], **{k: v for k, v in options.items() if v is not None})
