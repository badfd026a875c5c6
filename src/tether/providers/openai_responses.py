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

Answers, streamed or whole, are read by one decoder (:class:`ResponseDecoder`) into the same ``LlmEvent``s:
text (its message's item id on the first delta), refusals as text marked ``{"refusal": true}``, function
calls by ``call_id`` with their output index as ``index``, reasoning summaries (parts of one summary joined by
a blank line) as thinking, then the finish (``tool_calls`` after a function call; ``length`` or
``content_filter`` for an incomplete response) and the usage. A reasoning item always ends in a
``ThinkingDelta`` carrying the encrypted content of ``output_item.done`` as its signature (empty when the
server sent none), so that each item is one ``Thinking`` part (``StreamAccumulator`` closes a block on a
signature). ``response.failed`` and ``error`` events are raised as ``ProviderError``s.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import Any

from tether.errors import ConfigInvalid, InvalidResponse, ProviderError, TransportError
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
from tether.messages import Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ForceTool, ModelInfo, Request, ToolChoice, merge_extra
from tether.providers.http import HttpClient, ResponseLimits, RetryPolicy, Secret, decode_events, error_for_payload
from tether.providers.openai_chat import CANNOT_CALL_TOOLS
from tether.providers.registry import PROFILES
from tether.providers.wire import decoded
from tether.usage import Usage

ORIGIN = "openai-responses"
"""The provider name, and the ``provider_data["origin"]`` of what this provider needs back."""
ENCRYPTED_REASONING = "reasoning.encrypted_content"
SUMMARY_SEPARATOR = "\n\n"
"""Between the parts of one reasoning summary, streamed or whole."""
_OPENAI = PROFILES["openai"]
_PROVIDER_SIDE_FAILURES = frozenset({"server_error", "rate_limit_exceeded", "vector_store_timeout"})
"""``response.failed`` codes that are the provider's fault; every other code names something in the request."""
_INCOMPLETE: dict[str, FinishReason] = {"max_output_tokens": "length", "content_filter": "content_filter"}


def is_reasoning_model(name: str) -> bool:
    """Whether a model reasons (o-series, gpt-5 except its chat variants, codex), so it accepts the request for
    encrypted reasoning. Others (gpt-4o, gpt-4.1, gpt-5-chat-latest) refuse it with HTTP 400."""
    base = name.rsplit("/", 1)[-1].lower()
    if "chat" in base:
        return False
    return base.startswith(("o1", "o3", "o4", "gpt-5", "codex"))


class OpenAIResponsesProvider:
    """A model behind OpenAI's Responses API (``POST {base_url}/responses``)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        retry: RetryPolicy | None = None,
        response_limits: ResponseLimits | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """
        Args:
            model: the model id, as OpenAI names it.
            base_url: where the API is, up to and including ``/v1``; OpenAI's when not given.
            api_key: the key; otherwise ``OPENAI_API_KEY``. Required for OpenAI's own API, optional for
                another ``base_url``.
            stream: stream answers (the default), or ask for whole answers.
            retry: how failed requests are retried.
            response_limits: the most of an answer read (``ResponseLimits``); the defaults when not given.
            headers: extra headers sent with every request.
        """
        key = api_key or os.environ.get(_OPENAI.api_key_env or "")
        if not key and base_url is None:
            raise ConfigInvalid(
                f"'{ORIGIN}:{model}' needs an API key: set {_OPENAI.api_key_env} or pass api_key= to Agent"
            )
        self.streaming = stream
        self.reasoning = is_reasoning_model(model)
        self.info = ModelInfo(
            ORIGIN, model, supports_tools=model not in CANNOT_CALL_TOOLS, supports_thinking=self.reasoning
        )
        self._client = HttpClient(
            base_url or _OPENAI.base_url or "",
            provider=ORIGIN,
            api_key=Secret(key) if key else None,
            headers=headers,
            retry=retry,
            limits=response_limits,
        )

    def __repr__(self) -> str:
        return f"OpenAIResponsesProvider({self.info.name!r}, base_url={self._client.base_url!r})"

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        body = self.request_body(request)
        decoder = ResponseDecoder()
        client = self._client
        if not self.streaming:
            data = await client.post_json("/responses", body, timeout=request.timeout, deadline=request.deadline)
            for event in decoded(decoder.whole, data, ORIGIN):
                yield event
            return
        events = client.stream_events(
            "/responses", body, timeout=request.timeout, deadline=request.deadline, end_marker="[DONE]"
        )
        async for event in decode_events(events, decoder.event, decoder.end, ORIGIN):
            yield event

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``."""
        body: dict[str, Any] = {"model": self.info.name, "input": encode_input(request.messages)}
        if request.system:
            body["instructions"] = request.system
        body["stream"] = self.streaming
        body["store"] = False
        if self.reasoning:
            body["include"] = [ENCRYPTED_REASONING]
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
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
        merge_extra(body, settings.extra)
        if request.tools and request.tool_choice == "none":
            body["tool_choice"] = "none"  # the loop's tools-off call: an extra default must not undo it
        return body


# --- requests -----------------------------------------------------------------------------------------------


def encode_input(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The conversation as ``input`` items, in order."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            items += encode_assistant(message.parts)
        elif message.role == "tool":
            items += (
                {"type": "function_call_output", "call_id": part.call_id, "output": part.content}
                for part in message.parts
                if type(part) is ToolResult
            )
        else:
            items.append({"role": message.role, "content": message.plain_text})
    return items


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


def encode_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, ForceTool):
        return {"type": "function", "name": choice.name}
    return choice


# --- answers ------------------------------------------------------------------------------------------------


class ResponseDecoder:
    """Responses stream events (or one whole response) to ``LlmEvent``s, for one response.

    Output items are keyed by id: items already told by ``output_item.*`` events or deltas are not told
    again from the final response, which fills in only what a server did not stream.
    """

    __slots__ = ("_calls", "_ended", "_finished", "_indexes", "_keys", "_seen", "_started", "_streamed", "_texts")

    def __init__(self) -> None:
        self._started = False
        self._finished = False
        self._calls: dict[str, str] = {}
        """Item id (or ``#output_index``) -> call id."""
        self._ended: set[str] = set()
        self._streamed: set[str] = set()
        """Items (calls' arguments, reasoning text, message text) that arrived in deltas."""
        self._texts: set[str] = set()
        """Message items whose id already rode on a ``TextDelta``."""
        self._seen: set[str] = set()
        self._keys: dict[int, str] = {}
        """Output index -> item key."""
        self._indexes: dict[tuple[str, str], int] = {}
        """(item, delta kind) -> the last summary or content index, to separate summary parts."""

    def event(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed event (or of a whole response, from a server that ignored streaming)."""
        if not isinstance(data, dict):
            raise InvalidResponse(f"{ORIGIN} sent an event that is not a JSON object: {str(data)[:200]}")
        kind = data.get("type")
        if kind is None:
            return self.whole(data)
        if self._finished:
            return []  # nothing counts after the final response
        out: list[LlmEvent] = self._start(data.get("response") or {})
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            item_id = self._item_key(data)
            flag = {"refusal": True} if kind == "response.refusal.delta" else None
            out.append(TextDelta(data.get("delta") or "", self._text_data(item_id, flag)))
        elif kind == "response.function_call_arguments.delta":
            key = self._item_key(data)
            self._streamed.add(key)
            out.append(ToolCallDelta(self._call_id(key), data.get("delta") or ""))
        elif kind == "response.reasoning_summary_text.delta" or kind == "response.reasoning_text.delta":
            out += self._thinking(data, "summary_index" if "summary" in kind else "content_index")
        elif kind == "response.output_item.added":
            out += self._item_added(data.get("item") or {}, data.get("output_index", 0))
        elif kind == "response.function_call_arguments.done":
            out += self._arguments_done(self._item_key(data), data.get("arguments") or "")
        elif kind == "response.output_item.done":
            out += self._item_done(data.get("item") or {}, data.get("output_index", 0))
        elif kind == "response.completed":
            out += self._complete(data.get("response") or {})
        elif kind == "response.incomplete":
            out += self._complete({"status": "incomplete", **(data.get("response") or {})})
        elif kind == "response.failed":
            raise _failure((data.get("response") or {}).get("error"))
        elif kind == "error":
            inner = data.get("error")
            raise _failure(inner if isinstance(inner, dict) else data)
        return out  # anything else (in_progress, content parts, hosted tools' progress) says nothing new

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) response."""
        if not isinstance(data, dict):
            raise InvalidResponse(f"{ORIGIN} sent a response that is not a JSON object: {str(data)[:200]}")
        if data.get("status") == "failed" or (data.get("error") and "output" not in data):
            raise _failure(data.get("error"))
        if not isinstance(data.get("output"), list):
            raise InvalidResponse(f"{ORIGIN} sent a response without output: {json.dumps(data)[:200]}")
        return self._complete(data)

    def end(self) -> list[LlmEvent]:
        """After the last event: nothing more, or the error of a stream that stopped before its end."""
        if self._finished:
            return []
        if not self._started:
            raise InvalidResponse(f"{ORIGIN} ended the stream without sending anything")
        raise TransportError(f"{ORIGIN} ended the stream before finishing its answer")

    # --- pieces -----------------------------------------------------------------------------------------

    def _start(self, response: dict[str, Any]) -> list[LlmEvent]:
        if self._started:
            return []
        self._started = True
        return [StreamStart(model=response.get("model"), response_id=response.get("id"))]

    def _item_key(self, data: dict[str, Any], item: dict[str, Any] | None = None) -> str:
        """An item's id, or (for a server that leaves ids out) what its output index was first known as."""
        item_id = (item or {}).get("id") or data.get("item_id")
        index = data.get("output_index", 0)
        if isinstance(item_id, str) and item_id:
            key = self._keys.setdefault(index, item_id) if item else item_id
        else:
            key = self._keys.setdefault(index, f"#{index}")
        self._seen.add(key)
        return key

    def _text_data(self, key: str, flag: dict[str, Any] | None) -> dict[str, Any] | None:
        """Provider data for a message's text: its item id on the first delta (the accumulator keeps it)."""
        self._streamed.add(key)
        if key in self._texts or key.startswith("#"):
            return flag
        self._texts.add(key)
        return {"origin": ORIGIN, "id": key, **(flag or {})}

    def _thinking(self, data: dict[str, Any], index_field: str) -> list[LlmEvent]:
        key = self._item_key(data)
        self._streamed.add(key)
        index = data.get(index_field) or 0
        last = self._indexes.get((key, index_field))
        self._indexes[key, index_field] = index
        delta = data.get("delta") or ""
        return [ThinkingDelta(delta if last is None or last == index else SUMMARY_SEPARATOR + delta)]

    def _call_id(self, key: str) -> str:
        call_id = self._calls.get(key)
        if call_id is None:
            raise InvalidResponse(f"{ORIGIN} sent arguments for a function call that never started ({key})")
        return call_id

    def _item_added(self, item: dict[str, Any], index: int) -> list[LlmEvent]:
        key = self._item_key({"output_index": index}, item)
        if item.get("type") != "function_call" or key in self._calls:
            return []
        call_id = item.get("call_id") or f"call_{uuid.uuid4().hex[:24]}"
        self._calls[key] = call_id
        data = {"origin": ORIGIN, "id": key} if not key.startswith("#") else None
        out: list[LlmEvent] = [ToolCallStart(call_id, item.get("name") or "", index, data)]
        if arguments := item.get("arguments"):
            self._streamed.add(key)
            out.append(ToolCallDelta(call_id, arguments))
        return out

    def _arguments_done(self, key: str, arguments: str) -> list[LlmEvent]:
        call_id = self._call_id(key)
        if call_id in self._ended:
            return []
        out: list[LlmEvent] = []
        if key not in self._streamed and arguments:  # a server that sends the arguments only whole
            out.append(ToolCallDelta(call_id, arguments))
        self._streamed.add(key)
        self._ended.add(call_id)
        out.append(ToolCallEnd(call_id))
        return out

    def _item_done(self, item: dict[str, Any], index: int) -> list[LlmEvent]:
        """A complete output item: what of it was not streamed, and the end of a call or a reasoning block."""
        kind = item.get("type")
        if kind == "function_call":
            out = self._item_added(item, index)
            key = self._item_key({"output_index": index}, item)
            return out + self._arguments_done(key, item.get("arguments") or "")
        key = self._item_key({"output_index": index}, item)
        if kind == "reasoning":
            return self._reasoning_done(item, key)
        if kind != "message" or key in self._streamed:
            return []
        out = []
        for content in item.get("content") or ():
            if content.get("type") == "output_text" and content.get("text"):
                out.append(TextDelta(content["text"], self._text_data(key, None)))
            elif content.get("type") == "refusal" and content.get("refusal"):
                out.append(TextDelta(content["refusal"], self._text_data(key, {"refusal": True})))
        return out

    def _reasoning_done(self, item: dict[str, Any], key: str) -> list[LlmEvent]:
        text = "" if key in self._streamed else reasoning_text(item)
        encrypted = item.get("encrypted_content") or ""
        if not text and not encrypted and key not in self._streamed:
            return []  # nothing to show and nothing to send back
        data: dict[str, Any] = {"origin": ORIGIN, "id": item.get("id"), "summary": item.get("summary") or []}
        return [ThinkingDelta(text, signature=encrypted, provider_data=data)]

    def _complete(self, response: dict[str, Any]) -> list[LlmEvent]:
        """The final response: items not streamed, calls left open, then the finish and the usage."""
        out = self._start(response)
        for index, item in enumerate(response.get("output") or ()):
            item_id = item.get("id") if isinstance(item, dict) else None
            if isinstance(item, dict) and (item_id or f"#{index}") not in self._seen:
                out += self._item_done(item, index)
        finish = finish_reason(response, called=bool(self._calls))
        if finish != "length":
            for call_id in self._calls.values():
                if call_id not in self._ended:
                    self._ended.add(call_id)
                    out.append(ToolCallEnd(call_id))
        out.append(StreamEnd(finish, parse_usage(response.get("usage") or {})))
        self._finished = True
        return out


def reasoning_text(item: dict[str, Any]) -> str:
    """A whole reasoning item's readable text: its summary parts, else its reasoning text, separated alike."""
    for field, kind in (("summary", "summary_text"), ("content", "reasoning_text")):
        texts = [part.get("text") or "" for part in item.get(field) or () if part.get("type") == kind]
        if any(texts):
            return SUMMARY_SEPARATOR.join(texts)
    return ""


def finish_reason(response: dict[str, Any], *, called: bool) -> FinishReason:
    """``length`` or ``content_filter`` for an incomplete response, ``tool_calls`` when it called a function."""
    status = response.get("status")
    if status == "incomplete":
        return _INCOMPLETE.get((response.get("incomplete_details") or {}).get("reason") or "", "other")
    if status not in (None, "completed"):
        return "other"
    return "tool_calls" if called else "stop"


def parse_usage(usage: dict[str, Any]) -> Usage:
    """Responses usage; cached input tokens counted apart, reasoning tokens as part of the output."""
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
    return Usage(
        input_tokens=max((usage.get("input_tokens") or 0) - cached, 0),
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=cached,
        reasoning_tokens=(usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0,
    )


def _failure(error: Any) -> ProviderError:
    """The ``ProviderError`` for a failed response or an ``error`` event.

    ``error_for_payload`` reads ``invalid_request``-like names as a bad request and anything else as the
    provider's fault; ``response.failed`` codes such as ``invalid_prompt`` or ``image_too_large`` name the
    request, so they are marked as ``invalid_request_error`` first.
    """
    fields = dict(error) if isinstance(error, dict) else {"message": str(error or "the response failed")}
    fields.pop("sequence_number", None)
    if fields.get("type") == "error":
        del fields["type"]
    code = fields.get("code")
    if isinstance(code, str) and code not in _PROVIDER_SIDE_FAILURES and not fields.get("type"):
        fields["type"] = "invalid_request_error"
    return error_for_payload(ORIGIN, {"error": fields})


def from_model_name(prefix: str, name: str, **options: Any) -> OpenAIResponsesProvider:
    """The builder behind ``openai-responses:`` model strings."""
    return OpenAIResponsesProvider(name, **{k: v for k, v in options.items() if v is not None})
