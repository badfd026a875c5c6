"""Anthropic Messages (``POST {base_url}/messages``), spoken over plain HTTP.

Requests are built from tether's messages; answers, streamed or not, are read by
:class:`~tether.providers.anthropic_stream.AnthropicDecoder` into the same ``LlmEvent``s. How tether's
conversation becomes Anthropic's:

* The system prompt is the top-level ``system`` field (with the text of any ``system`` message).
* Only ``user`` and ``assistant`` roles exist: a ``tool`` message becomes ONE user message of ``tool_result``
  blocks, in order, ``is_error`` kept; consecutive messages of one role are merged into one, as the API wants
  roles to alternate. Empty text is left out (the API refuses empty text blocks), and so is a message left
  with nothing in it.
* An assistant message's parts become ``thinking``, ``text`` and ``tool_use`` blocks in their order. A
  ``Thinking`` part is sent back unchanged, signature included, only when it is ours
  (``provider_data["origin"] == "anthropic"``) and signed: the API refuses reasoning it did not sign, so the
  reasoning of another provider (or an unsigned block cut off mid-stream) is dropped. Redacted thinking is a
  ``Thinking`` with empty text, its data as the signature and ``provider_data["redacted"]``; it goes back as
  a ``redacted_thinking`` block.
* Server blocks (``server_tool_use`` and its results: tool search, web search, ...) are run by Anthropic and
  never by tether. They ride on the assistant message's ``provider_data`` and are sent back where they were
  among the parts, so a server tool's results stay in the model's context.
* A tool call's arguments that are not a JSON object go back as ``{}`` (the API takes objects only). A call
  made from code (programmatic tool calling) goes back with its ``caller``, kept in its ``provider_data``.
* ``max_tokens`` is always sent (the API requires it): ``ModelSettings.max_tokens``, else
  ``max_tokens_default`` (4096, which every Claude model accepts). When thinking is turned on with a
  ``budget_tokens`` at or above that default and no limit was given, the default is added on top of the
  budget, since the API wants ``max_tokens`` above the budget.
* ``ModelSettings.extra`` is merged into the body last: that is how thinking is turned on
  (``extra={"thinking": {"type": "enabled", "budget_tokens": 2048}}``) and how server tools or per-tool
  options (``defer_loading``, ``cache_control``, ``strict``) are sent: ``extra["tools"]``, a list, replaces
  the tools tether builds, so it must hold every tool. ``tool_choice`` stays ``none`` on the loop's
  tools-off summary call whatever ``extra`` says.
* Prompt caching: ``cache_control`` breakpoints are placed last (``anthropic_cache``; ``prompt_cache="off"``
  places none), counting any that ``extra`` set.
* ``tool_choice``: ``auto``, ``none``, ``required`` -> ``any``, ``ForceTool(name)`` -> ``tool``;
  ``parallel_tool_calls=False`` -> ``disable_parallel_tool_use``. With thinking on the API takes only ``auto``
  and ``none``: a forced choice then raises ``ConfigInvalid`` before anything is sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import msgspec

from tether.errors import ConfigInvalid
from tether.events import LlmEvent
from tether.keys import missing_key, read_key
from tether.message_memo import MessageMemo
from tether.messages import Attachment, Message, Text, Thinking, ToolCall, ToolResult
from tether.providers.anthropic_cache import PromptCache, checked_prompt_cache, place_breakpoints
from tether.providers.anthropic_stream import ORIGIN, AnthropicDecoder, anchors_of
from tether.providers.attachments import MB, base64_of, check_inline, is_text_document
from tether.providers.base import ForceTool, ModelInfo, Request, ToolChoice, ToolDefinition, merge_extra
from tether.providers.http.body import ResponseLimits
from tether.providers.http.client import HttpClient, OverHttp, Secret
from tether.providers.http.ratelimit import RateLimit, limiter_of
from tether.providers.http.retry import RetryPolicy
from tether.providers.memo import RoleJoiner, ToolsMemo, joined_json, json_list
from tether.providers.windows import checked_window, context_window_for

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
API_VERSION = "2023-06-01"
MAX_TOKENS_DEFAULT = 4096
"""The output limit sent when ``ModelSettings.max_tokens`` is not given: the smallest maximum of any Claude
model (Claude 3 Haiku and Opus), so that every model accepts it."""
CANNOT_CALL_TOOLS = ("claude-2", "claude-instant")
"""Name prefixes of models from before tool use (Claude 2 and Claude Instant)."""
NO_THINKING = ("claude-2", "claude-instant", "claude-3-opus", "claude-3-sonnet", "claude-3-haiku", "claude-3-5")
"""Name prefixes of models without extended thinking (it came with Claude 3.7)."""


class AnthropicProvider(OverHttp):
    """A Claude model behind the Anthropic Messages API. See the module docstring for the mapping."""

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
        max_tokens_default: int = MAX_TOKENS_DEFAULT,
        context_window: int | None = None,
        prompt_cache: PromptCache = "5m",
    ) -> None:
        """
        Args:
            model: the model id (``claude-sonnet-4-5``).
            base_url: where the API is, up to and including ``/v1``; Anthropic's when not given.
            api_key: the key; otherwise read from ``ANTHROPIC_API_KEY``.
            stream: stream answers (the default), or ask for whole answers.
            retry: how failed requests are retried.
            rate_limit: requests and tokens per window (``RateLimit``), shared by every run of this process
                that sends to the same API, key and model; none by default.
            response_limits: the most of an answer read (``ResponseLimits``); the defaults when not given.
            headers: extra headers sent with every request (``anthropic-beta``, ...).
            max_tokens_default: ``max_tokens`` when ``ModelSettings.max_tokens`` is not given.
            context_window: the model's context window in tokens; the known one by default
                (``tether.providers.windows``), e.g. 1,000,000 for a model run with the 1M-context beta header.
            prompt_cache: the TTL of the ``cache_control`` breakpoints placed in every request (``"5m"``, the
                default, or ``"1h"``), or ``"off"`` to place none (``tether.providers.anthropic_cache``).
        """
        key = read_key("anthropic", api_key)
        if not key:
            raise ConfigInvalid(missing_key("anthropic", model))
        if isinstance(max_tokens_default, bool) or not isinstance(max_tokens_default, int) or max_tokens_default < 1:
            raise ConfigInvalid(f"max_tokens_default must be a positive integer, not {max_tokens_default!r}")
        self.streaming = stream
        self.prompt_cache = checked_prompt_cache(prompt_cache)
        self.max_tokens_default = max_tokens_default
        self.info = ModelInfo(
            ORIGIN,
            model,
            supports_tools=not model.startswith(CANNOT_CALL_TOOLS),
            supports_thinking=not model.startswith(NO_THINKING),
            supports_output_schema=True,
            input_kinds=frozenset({"text", "image", "document"}),
            context_window=checked_window(context_window, f"'anthropic:{model}'") or context_window_for(ORIGIN, model),
        )
        self._client = HttpClient(
            base_url or DEFAULT_BASE_URL,
            provider=ORIGIN,
            api_key=Secret(key),
            auth_header="x-api-key",
            auth_prefix="",
            headers={"anthropic-version": API_VERSION, **(headers or {})},
            retry=retry,
            limits=response_limits,
            limiter=limiter_of(rate_limit, base_url or DEFAULT_BASE_URL, key, self.info.name),
        )

    def __repr__(self) -> str:
        return f"AnthropicProvider({self.info.model_string!r}, base_url={self._client.base_url!r})"

    def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        """The events of ``request``'s answer, streamed or read whole; the HTTP client's iterator as it is
        (no generator of this provider's around it), which releases the response however its consumer leaves."""
        body, decoder = self.request_payload(request), AnthropicDecoder(ORIGIN)
        return self._client.answer("/messages", body, decoder, request, streaming=self.streaming)

    def request_body(self, request: Request) -> dict[str, Any]:
        """The JSON body for ``request``, as plain data."""
        messages, system = encode_messages(request.messages)
        return self._body(request, messages, system, _tool_items)

    def request_payload(self, request: Request) -> bytes:
        """:meth:`request_body` encoded, the history and the tools from their kept JSON (``memo.py``): the cost
        of a request grows with the new messages, not with the whole history and every schema encoded again."""
        history, system = messages_json(request.messages)
        body = self._body(request, history, system, _TOOLS.items)
        for key in ("messages", "tools"):  # the kept JSON of each item, written into the body as it is
            if (items := body.get(key)) and isinstance(items, list) and isinstance(items[0], bytes):
                body[key] = json_list(items)
        return msgspec.json.encode(body)

    def _body(
        self,
        request: Request,
        messages: list[Any],
        system: list[str],
        tools_of: Callable[[Sequence[ToolDefinition]], list[Any]],
    ) -> dict[str, Any]:
        """The body with ``messages`` as they are given (a list of plain data or kept JSON), the system messages'
        ``system`` texts (the run's system prompt goes first), the tools as ``tools_of`` gives them, and the
        prompt cache's breakpoints (``anthropic_cache``)."""
        settings = request.settings
        max_tokens = settings.max_tokens if settings.max_tokens is not None else self.max_tokens_default
        if request.system:
            system.insert(0, request.system)
        body: dict[str, Any] = {"messages": messages}
        if request.tools:
            body["tools"] = tools_of(request.tools)
        body["model"], body["max_tokens"] = self.info.name, max_tokens
        if system:
            body["system"] = "\n\n".join(system)
        body["stream"] = self.streaming
        if request.tools:
            body["tool_choice"] = encode_tool_choice(request)
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        merge_extra(body, settings.extra)
        if settings.max_tokens is None and "max_tokens" not in settings.extra:
            budget = _thinking_budget(body)
            if budget is not None and budget >= body["max_tokens"]:
                body["max_tokens"] = budget + self.max_tokens_default
        if (output := request.output) is not None and output.schema is not None:  # JSON mode: the prompt alone
            body["output_config"] = {"format": {"type": "json_schema", "schema": output.schema}}
        if request.tools and request.tool_choice == "none":
            body["tool_choice"] = {"type": "none"}  # the loop's tools-off call: an extra default must not undo it
        elif request.tools and request.tool_choice != "auto" and _thinks(body):
            raise ConfigInvalid(
                f"Anthropic refuses a forced tool call (tool_choice={_shown(request.tool_choice)}) while thinking is "
                "on: use tool_choice='auto', or turn thinking off for this agent"
            )
        if self.prompt_cache != "off":
            place_breakpoints(body, self.prompt_cache)
        return body


def _tool_items(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [_tool_item(t) for t in tools]


def _tool_item(tool: ToolDefinition) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


_TOOLS = ToolsMemo(_tool_item)


def encode_tool_choice(request: Request) -> dict[str, Any]:
    """``tool_choice`` as the API names it, with ``disable_parallel_tool_use`` when parallel calls are off."""
    choice = request.tool_choice
    if choice == "none":
        return {"type": "none"}
    encoded: dict[str, Any]
    if isinstance(choice, ForceTool):
        encoded = {"type": "tool", "name": choice.name}
    else:
        encoded = {"type": "any" if choice == "required" else "auto"}
    if request.parallel_tool_calls is False:
        encoded["disable_parallel_tool_use"] = True
    return encoded


def encode_messages(messages: Iterable[Message]) -> tuple[list[dict[str, Any]], list[str]]:
    """tether messages as Anthropic messages (roles alternating), and the text of the system messages."""
    encoded: list[dict[str, Any]] = []
    system: list[str] = []
    for message in messages:
        if message.role == "system":
            if text := message.text:
                system.append(text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = assistant_blocks(message) if role == "assistant" else user_blocks(message)
        if not blocks:
            continue
        if encoded and encoded[-1]["role"] == role:
            encoded[-1]["content"] += blocks
        else:
            encoded.append({"role": role, "content": blocks})
    return encoded, system


_Kept = tuple[str, bytes, bytes]
"""A message as kept (``message_memo``): its role on the wire, its blocks' JSON (``b""``: nothing to send), and the
message of those blocks alone (what is sent when its neighbours are of the other role, as in most requests)."""
_MEMO: MessageMemo[_Kept] = MessageMemo()
_OPENING = {"user": b'{"role":"user","content":[', "assistant": b'{"role":"assistant","content":['}


def messages_json(messages: Sequence[Message]) -> tuple[list[bytes], list[str]]:
    """:func:`encode_messages`'s items as JSON, one per item, each message encoded once (``message_memo``), and
    the text of the system messages."""
    joined, system = RoleJoiner(_OPENING), []
    for message, (role, blocks, alone) in zip(messages, _MEMO.values(messages, _kept_json), strict=True):
        if role == "system":
            if text := message.text:
                system.append(text)
        elif blocks:
            joined.add(role, blocks, alone)
    return joined.items, system


def _kept_json(message: Message, position: int = 0) -> _Kept:
    """A message's :data:`_Kept` form (a system message's is its role alone: its text goes to ``system``)."""
    if message.role == "system":
        return "system", b"", b""
    if message.role == "assistant":
        role, blocks = "assistant", assistant_blocks(message)
    else:
        role, blocks = "user", user_blocks(message)
    text = joined_json(blocks)
    return role, text, _OPENING[role] + text + b"]}"


def user_blocks(message: Message) -> list[dict[str, Any]]:
    """A user or tool message's text and tool results, in order."""
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if type(part) is ToolResult:
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id}
            if part.attachments:  # a result's content may hold image and document blocks
                text = [{"type": "text", "text": part.content}] if part.content else []
                result["content"] = text + [attachment_block(a) for a in part.attachments]
            elif part.content:  # the API takes a result without content, not an empty text
                result["content"] = part.content
            result["is_error"] = part.is_error
            blocks.append(result)
        elif type(part) is Text and part.text:
            blocks.append({"type": "text", "text": part.text})
        elif type(part) is Attachment:
            blocks.append(attachment_block(part))
    return blocks


IMAGE_LIMIT = 5 * MB
"""An image, base64 as sent (Anthropic measures the encoded string)."""
DOCUMENT_LIMIT = 32 * MB
"""A request with PDFs."""


def attachment_block(attachment: Attachment) -> dict[str, Any]:
    """An ``image`` or ``document`` block: by ``url``, base64, or (a text document) as ``text``."""
    if attachment.category == "audio":
        raise ConfigInvalid(f"Anthropic's Messages API takes no audio ({attachment.media_type})")
    kind = "image" if attachment.category == "image" else "document"
    if attachment.url is not None:
        return {"type": kind, "source": {"type": "url", "url": attachment.url}}
    if is_text_document(attachment):
        assert attachment.data is not None
        text = attachment.data.decode("utf-8", errors="replace")
        block: dict[str, Any] = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": text},
        }
    else:
        check_inline(attachment, IMAGE_LIMIT if kind == "image" else DOCUMENT_LIMIT, f"Anthropic (an {kind})")
        source = {"type": "base64", "media_type": attachment.media_type, "data": base64_of(attachment)}
        block = {"type": kind, "source": source}
    if kind == "document" and attachment.name:
        block["title"] = attachment.name
    return block


def assistant_blocks(message: Message) -> list[dict[str, Any]]:
    """An assistant message's blocks in their order, with its server blocks put back where they were."""
    anchored = deque(anchors_of(message.provider_data))
    blocks: list[dict[str, Any]] = []
    parts = chars = 0

    def release() -> None:
        while anchored and anchored[0][0].parts <= parts and anchored[0][0].chars <= chars:
            blocks.append(anchored.popleft()[1])

    for part in message.parts:
        release()
        if type(part) is Text:
            text = part.text
            # Text blocks around a server block were merged into this part: cut it where the block was.
            while anchored and anchored[0][0].parts <= parts and chars < anchored[0][0].chars < chars + len(text):
                cut = anchored[0][0].chars - chars
                blocks.append({"type": "text", "text": text[:cut]})
                text, chars = text[cut:], chars + cut
                release()
            if text:
                blocks.append({"type": "text", "text": text})
                chars += len(text)
            continue
        parts += 1
        if type(part) is Thinking:
            if (thinking := thinking_block(part)) is not None:
                blocks.append(thinking)
        elif type(part) is ToolCall:
            arguments = part.arguments if part.arguments is not None else {}
            call = {"type": "tool_use", "id": part.id, "name": part.name, "input": arguments}
            data = part.provider_data or {}
            if data.get("origin") == ORIGIN and isinstance(data.get("caller"), dict):
                call["caller"] = data["caller"]  # a call made from code goes back naming the code that made it
            blocks.append(call)
    blocks += [block for _, block in anchored]
    return blocks


def thinking_block(part: Thinking) -> dict[str, Any] | None:
    """The block to send a thinking part back as; ``None`` for a foreign or unsigned one."""
    data = part.provider_data or {}
    if data.get("origin") != ORIGIN or not part.signature:
        return None
    if data.get("redacted"):
        return {"type": "redacted_thinking", "data": part.signature}
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _thinks(body: dict[str, Any]) -> bool:
    """Extended (or adaptive) thinking is on: the API then takes ``tool_choice`` ``auto`` or ``none`` only."""
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")


def _shown(choice: ToolChoice) -> str:
    return f"ForceTool({choice.name!r})" if isinstance(choice, ForceTool) else repr(choice)


def _thinking_budget(body: dict[str, Any]) -> int | None:
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool):
            return budget
    return None


def from_model_name(prefix: str, name: str, **options: Any) -> AnthropicProvider:
    """The builder behind ``anthropic:`` model strings."""
    return AnthropicProvider(name, **{k: v for k, v in options.items() if v is not None})
