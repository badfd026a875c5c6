"""OpenAI Chat Completions, spoken over plain HTTP, for OpenAI and every server that imitates it.

Requests are built from tether's messages; answers, streamed or not, are read by one decoder
(:class:`~tether.providers.openai_chat_stream.ChatDecoder`, which says how) into the same ``LlmEvent``s.
What differs between servers is a :class:`~tether.providers.registry.Profile`, not a subclass; among it, the
tool choices a server honours (:func:`tool_offer`): what it cannot be told is kept another way (``"none"`` by
offering no tools) or refused, never sent to be silently ignored. A tool call's ``extra_content`` (where
Gemini's OpenAI-compatible endpoint puts the call's thought signature) is sent back unchanged on later
requests to a server of the same profile, which Gemini 3 requires to continue after a tool call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec

from tether.errors import ConfigInvalid
from tether.events import LlmEvent
from tether.keys import missing_key, read_key
from tether.message_memo import MessageMemo
from tether.messages import Attachment, Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.attachments import (
    ALL_KINDS,
    MB,
    base64_of,
    check_inline,
    data_url,
    document_text,
    is_text_document,
    refuse_url,
)
from tether.providers.base import ForceTool, ModelInfo, OutputFormat, Request, ToolChoice, ToolDefinition, merge_extra
from tether.providers.http.body import ResponseLimits
from tether.providers.http.client import HttpClient, OverHttp, Secret
from tether.providers.http.ratelimit import RateLimit, limiter_of
from tether.providers.http.retry import RetryPolicy
from tether.providers.memo import ToolsMemo, joined_json, json_list, prompt_cache_key
from tether.providers.openai_chat_stream import CALL_EXTRA, ChatDecoder
from tether.providers.registry import PROFILES, Profile
from tether.providers.windows import checked_window, context_window_for

CANNOT_CALL_TOOLS = frozenset({"o1-mini", "o1-preview"})
"""Models that reject tool definitions outright."""


class OpenAIChatProvider(OverHttp):
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
        rate_limit: RateLimit | None = None,
        response_limits: ResponseLimits | None = None,
        headers: dict[str, str] | None = None,
        context_window: int | None = None,
        provider_name: str | None = None,
    ) -> None:
        """
        Args:
            model: the model id the server knows.
            profile: the server's facts (``PROFILES[...]``); OpenAI's by default.
            base_url: where the API is, up to and including ``/v1``; the profile's when not given.
            api_key: the key; otherwise read from the profile's environment variable.
            stream: stream answers (the default), or ask for whole answers.
            retry: how failed requests are retried.
            rate_limit: requests and tokens per window (``RateLimit``), shared by every run of this process
                that sends to the same API, key and model; none by default.
            response_limits: the most of an answer read (``ResponseLimits``); the defaults when not given.
            headers: extra headers sent with every request.
            context_window: the model's context window in tokens; by default the known window of a hosted
                model (``tether.providers.windows``), none for a local server's (it is the server's setting).
            provider_name: the name the provider goes by where a run is shown (footer, sessions, exports): a
                ``[providers.NAME]`` of the configuration is known by its NAME, not by the profile it speaks.
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
            provider_name or profile.name,
            model,
            supports_tools=profile.supports_tools and model not in CANNOT_CALL_TOOLS,
            supports_json_schema=profile.json_schema,
            supports_output_schema=profile.json_schema,
            input_kinds=ALL_KINDS if profile.name == "openai" else frozenset({"text", "image"}),
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
            limiter=limiter_of(rate_limit, url, key or None, self.info.name),
        )
        self._kept_system: tuple[str, bytes] = ("", b"")
        """The last system prompt and its message's JSON."""

    def __repr__(self) -> str:
        return f"OpenAIChatProvider({self.info.model_string!r}, base_url={self._client.base_url!r})"

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """The events of ``request``'s answer, streamed or read whole; the HTTP client's iterator as it is
        (no generator of this provider's around it), which releases the response however its consumer leaves."""
        body, decoder = self.request_payload(request), ChatDecoder(self.profile)
        return self._client.answer(
            "/chat/completions", body, decoder, request, streaming=self.streaming, end_marker="[DONE]"
        )

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``, as plain data."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
        for message in request.messages:
            messages += encode_message(message, self.profile.name)
        return self._body(request, messages, _tool_items)

    def request_payload(self, request: Request) -> bytes:
        """:meth:`request_body` encoded, the history and the tools from their kept JSON (``memo.py``): the cost
        of a request grows with the new messages, not with the whole history re-encoded every turn."""
        texts = _MEMO.values(request.messages, self._message_json, self.profile.name)
        if request.system:
            texts.insert(0, self._system_json(request.system))
        return msgspec.json.encode(self._body(request, json_list(texts), _TOOLS.json))

    def _message_json(self, message: Message, position: int) -> bytes:
        return message_json(message, self.profile.name)

    def _system_json(self, system: str) -> bytes:
        kept, text = self._kept_system
        if system != kept:
            text = joined_json(({"role": "system", "content": system},))
            self._kept_system = (system, text)
        return text

    def _body(
        self, request: Request, messages: Any, tools_of: Callable[[tuple[ToolDefinition, ...]], Any]
    ) -> dict[str, Any]:
        """The body: ``messages`` as given (plain data or kept JSON), the tools as ``tools_of`` gives them, the
        tool choice and the settings; ``ModelSettings.extra`` merged in last."""
        profile = self.profile
        tools, choice = tool_offer(request, profile)
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools_of(tools)
        body["model"], body["stream"] = self.info.name, self.streaming
        if self.streaming and profile.stream_options:
            body["stream_options"] = {"include_usage": True}
        if tools:
            if choice is not None:
                body["tool_choice"] = choice
            if request.parallel_tool_calls is not None and profile.parallel_tool_calls:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.json_schema is not None and profile.json_schema:
            schema = {"name": "answer", "schema": request.json_schema}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif (output := request.output) is not None:
            body["response_format"] = response_format(output, profile.json_schema)
        settings = request.settings
        if settings.max_tokens is not None:
            body[profile.max_tokens_field] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        if profile.prompt_cache_key:
            body["prompt_cache_key"] = prompt_cache_key(request)
        merge_extra(body, settings.extra)
        if request.tools and request.tool_choice == "none":  # tools off: an extra default must not undo it
            if "none" in profile.tool_choices:
                body["tool_choice"] = "none"
            else:
                for key in ("tools", "tool_choice", "parallel_tool_calls"):
                    body.pop(key, None)
        return body


def response_format(output: OutputFormat, json_schema: bool) -> dict[str, Any]:
    """``response_format`` for an answer as JSON: the schema (``strict`` when the schema allows), or JSON mode
    (``json_object``) when there is none or the server cannot take one (``Profile.json_schema``)."""
    if output.schema is None or not json_schema:
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {"name": output.name, "schema": output.schema, "strict": output.strict},
    }


_MEMO: MessageMemo[bytes] = MessageMemo()
"""Per message and server (profile): its Chat Completions messages' JSON, comma-joined."""


def message_json(message: Message, origin: str) -> bytes:
    """:func:`encode_message`'s items as JSON, comma-joined."""
    return joined_json(encode_message(message, origin))


def _tool_items(tools: tuple[ToolDefinition, ...]) -> list[dict[str, Any]]:
    return [_tool_item(t) for t in tools]


def _tool_item(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


_TOOLS = ToolsMemo(_tool_item)
"""Each tool's JSON, kept per tool: every run offers the same tools every turn, made afresh per agent around the
tool's own schema, and their schemas are often the largest part of a body after the history."""


def encode_message(message: Message, origin: str = "") -> list[dict[str, Any]]:
    """One tether message as Chat Completions messages (a tool message becomes one per result). ``origin`` is
    the profile name of the server it goes to: a tool call's ``extra_content`` goes back to that server only."""
    if message.role == "tool":
        items: list[dict[str, Any]] = [
            {"role": "tool", "tool_call_id": part.call_id, "content": part.content}
            for part in message.parts
            if type(part) is ToolResult
        ]
        attached = [part for part in message.parts if type(part) is ToolResult and part.attachments]
        if attached:  # a tool message holds text only: the attachments follow the results, in a user message
            items.append({"role": "user", "content": _attached_content(attached)})
        return items
    if message.role == "user" and any(type(part) is Attachment for part in message.parts):
        return [
            {"role": "user", "content": [_content_part(part) for part in message.parts if type(part) is not Thinking]}
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


IMAGE_LIMIT = 20 * MB
"""An image in a Chat Completions request (OpenAI's documented limit per image)."""
FILE_LIMIT = 32 * MB
"""A file (a PDF) in a Chat Completions request."""
AUDIO_FORMATS = {"audio/wav": "wav", "audio/mpeg": "mp3"}
"""The audio ``input_audio`` takes: WAV and MP3."""


def _content_part(part: Part) -> dict[str, Any]:
    """A user message's part as a Chat Completions content part: text, ``image_url`` (a URL or a data URL),
    ``file`` (a PDF, inline), ``input_audio`` (WAV or MP3, inline); a text document as its text."""
    if type(part) is Text:
        return {"type": "text", "text": part.text}
    assert isinstance(part, Attachment), f"a user message holds text and attachments, not {part!r}"
    if is_text_document(part):
        return {"type": "text", "text": document_text(part)}
    if part.category == "image":
        check_inline(part, IMAGE_LIMIT, "Chat Completions (an image)")
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    refuse_url(part, "Chat Completions")
    if part.category == "document":
        check_inline(part, FILE_LIMIT, "Chat Completions (a file)")
        return {"type": "file", "file": {"filename": part.name or "document.pdf", "file_data": data_url(part)}}
    audio = AUDIO_FORMATS.get(part.media_type)
    if audio is None:
        raise ConfigInvalid(f"Chat Completions takes WAV or MP3 audio, not {part.media_type}")
    return {"type": "input_audio", "input_audio": {"data": base64_of(part), "format": audio}}


def _attached_content(results: list[ToolResult]) -> list[dict[str, Any]]:
    """What tools returned besides their text, as one user message's content, each group named by its call."""
    content: list[dict[str, Any]] = []
    for result in results:
        content.append({"type": "text", "text": f"Attached to the result of {result.name} ({result.call_id}):"})
        content += [_content_part(attachment) for attachment in result.attachments]
    return content


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


def from_model_name(prefix: str, name: str, **options: Any) -> OpenAIChatProvider:
    """The builder behind ``openai:``, ``ollama:``, ``vllm:``, ... model strings."""
    return OpenAIChatProvider(name, profile=PROFILES[prefix], **{k: v for k, v in options.items() if v is not None})
