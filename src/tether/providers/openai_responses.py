"""OpenAI Responses (``POST {base_url}/responses``), spoken over plain HTTP.

Requests are stateless: ``store: false``, and every request carries the whole conversation as ``input`` items
in order. The system prompt is ``instructions``; user text is a user message; assistant text is an assistant
``message`` with ``output_text`` content (``refusal`` content for text marked ``{"refusal": true}``); a tool
call is a ``function_call`` item and its result a ``function_call_output`` item, paired by ``call_id``.

Reasoning goes back statelessly. Reasoning models (:func:`is_reasoning_model`) are asked to
``include: ["reasoning.encrypted_content"]`` (other models answer that request with HTTP 400, so they are not
asked; ``ModelSettings.extra={"include": [...]}`` overrides the choice). Each reasoning item becomes one
``Thinking`` part: its summary (or reasoning text) as the text, ``encrypted_content`` as the signature,
``{"origin": "openai-responses", "id": ..., "summary": [...]}`` as provider data; on a later turn it is sent
back as a ``reasoning`` item (id, encrypted_content, summary). What is not sent back, and why:

* thinking of another origin (an Anthropic signature, a Gemini thought, Chat Completions reasoning text): the
  API has no input for another provider's reasoning, and sending it as text would put words in the model's
  mouth;
* our own reasoning without encrypted content: with ``store: false`` its id alone refers to nothing (HTTP 404).

OpenAI links a reasoning item to the output items after it by their ids: the ``message`` and
``function_call`` items of an assistant message are sent with their recorded ids when a reasoning item of
that message is sent back, and without any id otherwise (a ``function_call`` id without its reasoning item
is refused with HTTP 400).

Tools are sent with ``strict: false``: left out, Responses makes every schema strict, which makes optional
arguments mandatory; tether validates arguments itself, as it does over Chat Completions.

Answers, streamed or whole, are read by :class:`~tether.providers.openai_responses_stream.ResponsesDecoder`
(its module says how items are keyed, what is told once, and which events are ignored).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import msgspec

from tether.errors import ConfigInvalid
from tether.events import LlmEvent
from tether.keys import missing_key, read_key
from tether.message_memo import MessageMemo
from tether.messages import Attachment, Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.attachments import MB, check_inline, data_url, document_text, is_text_document
from tether.providers.base import ForceTool, ModelInfo, OutputFormat, Request, ToolChoice, ToolDefinition, merge_extra
from tether.providers.http.body import ResponseLimits
from tether.providers.http.client import HttpClient, OverHttp, Secret
from tether.providers.http.ratelimit import RateLimit, limiter_of
from tether.providers.http.retry import RetryPolicy
from tether.providers.memo import ToolsMemo, joined_json, json_list, prompt_cache_key
from tether.providers.openai_chat import CANNOT_CALL_TOOLS
from tether.providers.openai_responses_stream import (
    ORIGIN,
    SUMMARY_SEPARATOR,
    ResponsesDecoder,
    finish_reason,
    parse_usage,
    reasoning_text,
)
from tether.providers.registry import PROFILES
from tether.providers.windows import checked_window, context_window_for

__all__ = [
    "ENCRYPTED_REASONING",
    "ORIGIN",
    "SUMMARY_SEPARATOR",
    "OpenAIResponsesProvider",
    "encode_input",
    "finish_reason",
    "from_model_name",
    "is_reasoning_model",
    "parse_usage",
    "reasoning_text",
]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
_OPENAI = PROFILES["openai"]


def is_reasoning_model(name: str) -> bool:
    """Whether a model reasons (o-series, gpt-5 except its chat variants, codex), so it accepts the request for
    encrypted reasoning. Others (gpt-4o, gpt-4.1, gpt-5-chat-latest) refuse it with HTTP 400."""
    base = name.rsplit("/", 1)[-1].lower()
    if "chat" in base:
        return False
    return base.startswith(("o1", "o3", "o4", "gpt-5", "codex"))


class OpenAIResponsesProvider(OverHttp):
    """A model behind OpenAI's Responses API (``POST {base_url}/responses``)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        rate_limit: RateLimit | None = None,
        response_limits: ResponseLimits | None = None,
        headers: dict[str, str] | None = None,
        context_window: int | None = None,
    ) -> None:
        """
        Args:
            model: the model id, as OpenAI names it.
            base_url: where the API is, up to and including ``/v1``; OpenAI's when not given.
            api_key: the key; otherwise ``OPENAI_API_KEY``. Required for OpenAI's own API, optional for
                another ``base_url``.
            stream: stream answers (the default), or ask for whole answers.
            retry: how failed requests are retried.
            rate_limit: requests and tokens per window (``RateLimit``), shared by every run of this process
                that sends to the same API, key and model; none by default.
            response_limits: the most of an answer read (``ResponseLimits``); the defaults when not given.
            headers: extra headers sent with every request.
            context_window: the model's context window in tokens; the known one by default
                (``tether.providers.windows``).
        """
        key = read_key(ORIGIN, api_key)
        if not key and base_url is None:
            raise ConfigInvalid(missing_key(ORIGIN, model))
        self.streaming = stream
        self.reasoning = is_reasoning_model(model)
        self.info = ModelInfo(
            ORIGIN,
            model,
            supports_tools=model not in CANNOT_CALL_TOOLS,
            supports_thinking=self.reasoning,
            supports_output_schema=True,
            input_kinds=frozenset({"text", "image", "document"}),
            context_window=checked_window(context_window, f"'{ORIGIN}:{model}'") or context_window_for(ORIGIN, model),
        )
        self._client = HttpClient(
            base_url or _OPENAI.base_url or "",
            provider=ORIGIN,
            api_key=Secret(key) if key else None,
            headers=headers,
            retry=retry,
            limits=response_limits,
            limiter=limiter_of(rate_limit, base_url or _OPENAI.base_url or "", key, self.info.name),
        )

    def __repr__(self) -> str:
        return f"OpenAIResponsesProvider({self.info.name!r}, base_url={self._client.base_url!r})"

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """The events of ``request``'s answer, streamed or read whole; the HTTP client's iterator as it is
        (no generator of this provider's around it), which releases the response however its consumer leaves."""
        body, decoder = self.request_payload(request), ResponsesDecoder()
        return self._client.answer("/responses", body, decoder, request, streaming=self.streaming, end_marker="[DONE]")

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``, as plain data."""
        return self._body(request, encode_input(request.messages), _tool_items)

    def request_payload(self, request: Request) -> bytes:
        """:meth:`request_body` encoded, the history and the tools from their kept JSON (``memo.py``): the cost
        of a request grows with the new messages, not with the whole history and every schema encoded again."""
        return msgspec.json.encode(self._body(request, input_json(request.messages), _TOOLS.json))

    def _body(
        self, request: Request, items: Any, tools_of: Callable[[Sequence[ToolDefinition]], Any]
    ) -> dict[str, Any]:
        """The body with ``items`` as its ``input`` (plain data or kept JSON) and the tools as ``tools_of`` gives
        them."""
        body: dict[str, Any] = {"input": items}
        if request.tools:
            body["tools"] = tools_of(request.tools)
        body["model"] = self.info.name
        if request.system:
            body["instructions"] = request.system
        body["stream"] = self.streaming
        body["store"] = False
        if self.reasoning:
            body["include"] = [ENCRYPTED_REASONING]
        if request.tools:
            body["tool_choice"] = encode_tool_choice(request.tool_choice)
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        settings = request.settings
        if settings.max_tokens is not None:
            body["max_output_tokens"] = settings.max_tokens
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        body["prompt_cache_key"] = prompt_cache_key(request)
        merge_extra(body, settings.extra)
        if (output := request.output) is not None:
            body["text"] = {"format": text_format(output)}
        if request.tools and request.tool_choice == "none":
            body["tool_choice"] = "none"  # the loop's tools-off call: an extra default must not undo it
        return body


def text_format(output: OutputFormat) -> dict[str, Any]:
    """``text.format`` for an answer as JSON: a ``json_schema`` format, or JSON mode (``json_object``)."""
    if output.schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "name": output.name, "schema": output.schema, "strict": output.strict}


# --- requests -----------------------------------------------------------------------------------------------


def encode_input(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The conversation as ``input`` items, in order."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            items += encode_assistant(message.parts)
        elif message.role == "tool":
            items += (
                {"type": "function_call_output", "call_id": part.call_id, "output": _output(part)}
                for part in message.parts
                if type(part) is ToolResult
            )
        elif message.role == "user" and any(type(part) is Attachment for part in message.parts):
            content = [_input_part(part) for part in message.parts if type(part) is not Thinking]
            items.append({"role": "user", "content": content})
        else:
            items.append({"role": message.role, "content": message.plain_text})
    return items


def _output(result: ToolResult) -> str | list[dict[str, Any]]:
    """A call's ``output``: its text, or, with attachments, a list of input content (text, images, files)."""
    if not result.attachments:
        return result.content
    return [{"type": "input_text", "text": result.content}, *(_input_part(a) for a in result.attachments)]


IMAGE_LIMIT = 20 * MB
FILE_LIMIT = 32 * MB
"""An image and a file (a PDF) in a Responses request, as OpenAI documents them."""


def _input_part(part: Part) -> dict[str, Any]:
    """A user message's part as Responses content: ``input_text``, ``input_image`` (a URL or a data URL),
    ``input_file`` (a PDF, by ``file_url`` or inline ``file_data``); a text document as its text."""
    if type(part) is Text:
        return {"type": "input_text", "text": part.text}
    assert isinstance(part, Attachment), f"a user message holds text and attachments, not {part!r}"
    if is_text_document(part):
        return {"type": "input_text", "text": document_text(part)}
    if part.category == "image":
        check_inline(part, IMAGE_LIMIT, "Responses (an image)")
        return {"type": "input_image", "image_url": data_url(part)}
    if part.category == "document":
        if part.url is not None:
            return {"type": "input_file", "file_url": part.url}
        check_inline(part, FILE_LIMIT, "Responses (a file)")
        return {"type": "input_file", "filename": part.name or "document.pdf", "file_data": data_url(part)}
    raise ConfigInvalid(f"Responses takes no audio input ({part.media_type})")


_MEMO: MessageMemo[bytes] = MessageMemo()
"""Per message: its ``input`` items' JSON, comma-joined (``b""``: none)."""


def input_json(messages: Iterable[Message]) -> msgspec.Raw:
    """:func:`encode_input`'s items as a JSON list, each message's encoded once (``message_memo``)."""
    return json_list([items for items in _MEMO.values(messages, _kept_json) if items])


def _kept_json(message: Message, position: int = 0) -> bytes:
    return joined_json(encode_input((message,)))


def encode_assistant(parts: Iterable[Part]) -> list[dict[str, Any]]:
    """One assistant message as output items in part order: consecutive text as one ``message`` item, our
    reasoning as ``reasoning`` items, tool calls as ``function_call`` items (see the module docstring)."""
    parts = tuple(parts)
    linked = any(isinstance(part, Thinking) and _replayable(part) for part in parts)
    items: list[dict[str, Any]] = []
    texts: list[Text] = []
    for part in parts:
        if isinstance(part, Text):
            texts.append(part)
            continue
        if isinstance(part, Thinking):
            if not _replayable(part):
                continue  # dropped: no item, so the text around it stays one message
            item = _reasoning_item(part)
        elif isinstance(part, ToolCall):
            item = _call_item(part, linked)
        else:
            continue
        items += _message_item(texts, linked)
        texts = []
        items.append(item)
    items += _message_item(texts, linked)
    return items


def _own_id(provider_data: dict[str, Any] | None) -> str | None:
    if provider_data and provider_data.get("origin") == ORIGIN:
        item_id = provider_data.get("id")
        return item_id if isinstance(item_id, str) and item_id else None
    return None


def _replayable(part: Thinking) -> bool:
    """Our reasoning with its encrypted content (without it, its id names nothing the server kept)."""
    return bool(part.signature) and _own_id(part.provider_data) is not None


def _reasoning_item(part: Thinking) -> dict[str, Any]:
    data = part.provider_data or {}
    summary = data.get("summary")
    if not isinstance(summary, list):
        summary = [{"type": "summary_text", "text": part.text}] if part.text else []
    return {"type": "reasoning", "id": data["id"], "encrypted_content": part.signature, "summary": summary}


def _message_item(texts: list[Text], linked: bool) -> list[dict[str, Any]]:
    content = [
        {"type": "refusal", "refusal": t.text}
        if t.provider_data and t.provider_data.get("refusal")
        else {"type": "output_text", "text": t.text}
        for t in texts
        if t.text
    ]
    if not content:
        return []
    item: dict[str, Any] = {"type": "message", "role": "assistant", "content": content}
    item_id = next((i for t in texts if (i := _own_id(t.provider_data))), None) if linked else None
    if item_id:
        item["id"] = item_id
    return [item]


def _call_item(call: ToolCall, linked: bool) -> dict[str, Any]:
    arguments = call.raw_arguments
    if arguments is None:
        arguments = json.dumps(call.arguments or {}, ensure_ascii=False)
    item: dict[str, Any] = {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments}
    if linked and (item_id := _own_id(call.provider_data)):
        item["id"] = item_id
    return item


def _tool_items(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [_tool_item(t) for t in tools]


def _tool_item(tool: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function", "name": tool.name, "description": tool.description, "parameters": tool.parameters,
        "strict": False,
    }  # fmt: skip


_TOOLS = ToolsMemo(_tool_item)


def encode_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ForceTool):
        return {"type": "function", "name": choice.name}
    return choice


def from_model_name(prefix: str, name: str, **options: Any) -> OpenAIResponsesProvider:
    """The builder behind ``openai-responses:`` model strings."""
    return OpenAIResponsesProvider(name, **{k: v for k, v in options.items() if v is not None})
