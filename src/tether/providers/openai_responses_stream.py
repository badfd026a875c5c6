"""OpenAI Responses answers, streamed or whole, read into tether's ``LlmEvent``s.

One decoder (:class:`ResponsesDecoder`) reads the stream's events, or one whole response, into the same events:

* **Output items are keyed by ``output_index``**, their place in the response's ``output``, and only when an
  event has none by ``item_id``. OpenAI gives an item one id and one index; some compatible servers give every
  event a new ``item_id``, and the index is what stays. An ``output_item.added`` at an index whose item is
  already done starts a new item (a server that numbers every item 0). An item's own id (for the ids sent
  back with reasoning) is the first one it was given.
* **Each part is told once.** A message's text comes from ``output_text.delta`` / ``refusal.delta``; the
  ``.done`` events, ``content_part.done``, ``output_item.done`` and the final response carry it whole again,
  and are read only for the parts no delta told (a server that sends text only whole). The same holds for a
  call's arguments and for reasoning: ``output_item.done`` after deltas adds nothing but the end.
* Text carries its message's item id on the first delta; refusals are text marked ``{"refusal": true}``;
  function calls start at ``output_item.added`` (or whenever first seen) with their output index as
  ``index`` and end at ``function_call_arguments.done`` or ``output_item.done``. Reasoning summaries (parts of
  one summary joined by a blank line) and reasoning text are thinking; a reasoning item always ends in a
  ``ThinkingDelta`` carrying the encrypted content of ``output_item.done`` as its signature (empty when the
  server sent none), so that each item is one ``Thinking`` part.
* The finish: ``tool_calls`` after a function call, else ``stop``; ``response.incomplete`` is ``length``
  (``max_output_tokens``) or ``content_filter`` by its reason. ``response.failed`` and ``error`` events are
  raised as the ``ProviderError`` the whole error object names (:func:`~tether.providers.http.error_for_payload`).
* Every other event (``created``/``in_progress``/``queued``, annotations, hosted tools' progress:
  ``web_search_call.*``, ``file_search_call.*``, ``code_interpreter_call*``, ``image_generation_call.*``,
  ``mcp_*``, ``custom_tool_call_input.*``, and types not yet invented) says nothing a turn needs and is
  ignored; so are output items of other types.
* Every event is read into the typed wire shapes below (:class:`~tether.providers.wire.Shape`): a value of the
  wrong JSON type is ``InvalidResponse`` naming the field (after the event's type), so no event carries a
  wrongly typed value. Nothing after the final response counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from tether.errors import InvalidResponse, ProviderError
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
from tether.providers.decoding import parse_json_text, unfinished
from tether.providers.http.errors import error_for_payload
from tether.providers.wire import Shape, as_count, malformed
from tether.usage import NO_USAGE, Usage

ORIGIN = "openai-responses"
"""The provider name, and the ``provider_data["origin"]`` of what this provider needs back."""
SUMMARY_SEPARATOR = "\n\n"
"""Between the parts of one reasoning summary, streamed or whole."""
_REQUEST_SIDE_FAILURES = frozenset(
    {
        "invalid_prompt",
        "invalid_image",
        "invalid_image_format",
        "invalid_base64_image",
        "invalid_image_url",
        "image_too_large",
        "image_too_small",
        "image_parse_error",
        "image_content_policy_violation",
        "invalid_image_mode",
        "image_file_too_large",
        "unsupported_image_media_type",
        "empty_image_file",
        "failed_to_download_image",
        "image_file_not_found",
    }
)
"""``response.failed`` codes that name something in the request (the API reference's list); any other code
goes to ``error_for_payload`` as it came."""
_INCOMPLETE: dict[str, FinishReason] = {"max_output_tokens": "length", "content_filter": "content_filter"}
_TEXT_FIELDS = {"output_text": "text", "refusal": "refusal"}
"""Message content part types -> the field holding their text."""


# --- the wire shapes ------------------------------------------------------------------------------------------


class _Part(msgspec.Struct, gc=False):
    """A content part (``output_text``, ``refusal``), or a reasoning summary or text part."""

    type: str | None = None
    text: str | None = None
    refusal: str | None = None


class _OutputItem(msgspec.Struct, gc=False):
    """An output item, whatever its type: each type reads its own fields (``summary`` is also kept raw)."""

    type: str | None = None
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    content: list[_Part | None] | None = None
    summary: list[_Part | None] | None = None
    encrypted_content: str | None = None


class _Tokens(msgspec.Struct, gc=False):
    cached_tokens: Any = None
    reasoning_tokens: Any = None


class _Usage(msgspec.Struct, gc=False):
    """Counts of any JSON type: read forgivingly (``wire.as_count``)."""

    input_tokens: Any = None
    output_tokens: Any = None
    input_tokens_details: _Tokens | None = None
    output_tokens_details: _Tokens | None = None


class _Incomplete(msgspec.Struct, gc=False):
    reason: str | None = None


class _Response(msgspec.Struct, gc=False):
    """A response: the one ``response.created`` starts, or the final one (its ``output`` items read as
    :class:`_OutputItem`, and kept as they came)."""

    id: str | None = None
    model: str | None = None
    status: str | None = None
    output: list[dict[str, Any] | None] | None = None
    usage: _Usage | None = None
    incomplete_details: _Incomplete | None = None
    error: Any = None


class _Event(msgspec.Struct, gc=False):
    """A stream event, whatever its type (each type reads its own fields)."""

    type: str | None = None
    response: dict[str, Any] | None = None
    output_index: int | None = None
    content_index: int | None = None
    summary_index: int | None = None
    item_id: str | None = None
    delta: str | None = None
    text: str | None = None
    refusal: str | None = None
    arguments: str | None = None
    part: dict[str, Any] | None = None
    item: dict[str, Any] | None = None
    error: Any = None


def _event_prefix(data: Any) -> str:
    """What a wrong field of an event is named after: the event's type, when it has one."""
    kind = data.get("type") if type(data) is dict else None
    return kind if type(kind) is str else "event"


class _Known(msgspec.Struct, gc=False):
    """What is read of every event, whatever its type."""

    response: dict[str, Any] | None = None


_EVENT = Shape(_Event, "the event")
_KNOWN = Shape(_Known, "the event")
_RESPONSE = Shape(_Response, "the response")
_ITEM = Shape(_OutputItem, "the item")
_PART = Shape(_Part, "the part")
_USAGE = Shape(_Usage, "usage")


class _Item:
    """What the decoder knows of one output item."""

    __slots__ = ("arguments", "call_id", "done", "ended", "id", "index", "labelled", "last", "told")

    def __init__(self, index: int, item_id: str) -> None:
        self.index = index
        self.id = item_id
        """The item's id as first given ("" when none)."""
        self.done = False
        """``output_item.done`` (or the final response) told the whole item."""
        self.told: set[tuple[str, int]] = set()
        """Parts told: ``("content" | "summary" | "reasoning", index)``."""
        self.last: dict[str, int] = {}
        """Thinking field -> the index of its last part told, to separate summary parts."""
        self.call_id: str | None = None
        self.arguments = False
        """A call's arguments were told."""
        self.ended = False
        self.labelled = False
        """Its id rode on a ``TextDelta``."""


class ResponsesDecoder:
    """Responses stream events (or one whole response) to ``LlmEvent``s, for one response (module docstring):
    a :class:`~tether.providers.decoding.Decoder`."""

    __slots__ = ("_by_id", "_by_index", "_finished", "_items", "_started")
    provider = ORIGIN

    def __init__(self) -> None:
        self._started = False
        self._finished = False
        self._items: list[_Item] = []
        self._by_index: dict[int, _Item] = {}
        self._by_id: dict[str, _Item] = {}

    def feed_json(self, text: str | bytes) -> list[LlmEvent]:
        """The events of one streamed event's JSON (or of a whole response's, from a server that ignored
        streaming)."""
        try:
            event = _EVENT.of_text(text, ORIGIN, _event_prefix)
        except InvalidResponse:
            return self._unshaped(parse_json_text(text, ORIGIN))
        return self._event(event, lambda: parse_json_text(text, ORIGIN))

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed event, parsed (or of a whole response)."""
        try:
            event = _EVENT.of(data, ORIGIN, _event_prefix)
        except InvalidResponse:
            return self._unshaped(data)
        return self._event(event, lambda: data)

    def _unshaped(self, data: Any) -> list[LlmEvent]:
        """An event the shape of events refuses: a whole response (it has no type), an event of a type added
        after this was written (only its ``response`` is read, as for every event), or a malformed one."""
        if type(data) is not dict:
            raise malformed(ORIGIN, "the event", data)
        kind = data.get("type")
        if kind is None:
            return self.whole(data)
        if type(kind) is str and kind not in _HANDLERS and kind != "error":
            return [] if self._finished else self._start(_KNOWN.of(data, ORIGIN, kind).response, f"{kind}.response")
        _EVENT.of(data, ORIGIN, _event_prefix)  # raises, naming the field
        raise AssertionError("unreachable: the event's shape was refused")

    def _event(self, event: _Event, data: Callable[[], Any]) -> list[LlmEvent]:
        """The events of ``event``; ``data()`` is its JSON (a whole response's, when it has no type)."""
        kind = event.type
        if kind is None:
            return self.whole(data())
        if self._finished:
            return []  # nothing counts after the final response
        if kind == "error":
            inner = event.error
            raise failure(inner if type(inner) is dict else data())
        out = self._start(event.response, f"{kind}.response")
        handler = _HANDLERS.get(kind)
        if handler is not None:
            out += handler(self, event, kind)
        return out

    def whole_json(self, body: str | bytes) -> list[LlmEvent]:
        return self.whole(parse_json_text(body, ORIGIN, "a body"))

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) response."""
        if type(data) is not dict:
            raise malformed(ORIGIN, "the response", data)
        response = _RESPONSE.of(data, ORIGIN, "response")
        if response.status == "failed" or (response.error and "output" not in data):
            raise failure(response.error)
        if response.output is None:
            raise InvalidResponse(f"{ORIGIN} sent a response without output: {str(data)[:200]}")
        return self._complete(response)

    def end(self) -> list[LlmEvent]:
        """After the last event: nothing more, or the error of a stream that stopped before its end."""
        if self._finished:
            return []
        raise unfinished(ORIGIN, started=self._started)

    # --- items --------------------------------------------------------------------------------------------

    def _start(self, response: dict[str, Any] | None, where: str) -> list[LlmEvent]:
        if self._started:
            return []
        self._started = True
        read = _RESPONSE.of(response or {}, ORIGIN, "response")
        return [StreamStart(model=read.model or None, response_id=read.id or None)]

    def _find(self, index: int | None, item_id: str, *, new: bool = False) -> _Item:
        """The item at ``index`` (or, without one, named ``item_id``); ``new``: an ``output_item.added``."""
        item = self._by_index.get(index) if index is not None else None
        if item is not None and new and item.done:
            item = None  # the index is used again: a new item
        if item is None and item_id:
            item = self._by_id.get(item_id)
            if item is not None and new and item.done:
                item = None
        if item is None:
            item = _Item(len(self._items) if index is None else index, item_id)
            self._items.append(item)
        if index is not None:
            self._by_index[index] = item
        if item_id:
            self._by_id.setdefault(item_id, item)
            item.id = item.id or item_id
        return item

    def _item_of(self, event: _Event) -> _Item:
        """The item an event is about, by its ``output_index`` or its ``item_id``; an event that names neither
        is about the item told last (or the first)."""
        index, item_id = event.output_index, event.item_id or ""
        if index is None and not item_id:
            return self._items[-1] if self._items else self._find(0, "")
        return self._find(index, item_id)

    def _label(self, item: _Item, flag: dict[str, Any] | None) -> dict[str, Any] | None:
        """Provider data for a message's text: its item id on the first piece (the accumulator keeps it)."""
        if item.labelled or not item.id:
            return flag
        item.labelled = True
        return {"origin": ORIGIN, "id": item.id, **(flag or {})}

    def _said(self, item: _Item, part: int, text: str, refusal: bool) -> list[LlmEvent]:
        """A piece of a message's text (content part ``part``)."""
        item.told.add(("content", part))
        if not text:
            return []
        return [TextDelta(text, self._label(item, {"refusal": True} if refusal else None))]

    def _thought(self, item: _Item, field: str, part: int, text: str) -> str:
        """A piece of reasoning (``field``: ``summary`` or ``reasoning``), a blank line before a new part."""
        item.told.add((field, part))
        last = item.last.get(field)
        item.last[field] = part
        return text if last is None or last == part else SUMMARY_SEPARATOR + text

    def _call_started(self, item: _Item, call: _OutputItem) -> list[LlmEvent]:
        if item.call_id is not None:
            return []
        item.call_id = call_id = call.call_id or f"call_{uuid.uuid4().hex[:24]}"
        data = {"origin": ORIGIN, "id": item.id} if item.id else None
        out: list[LlmEvent] = [ToolCallStart(call_id, call.name or "", item.index, data)]
        if arguments := call.arguments:
            item.arguments = True
            out.append(ToolCallDelta(call_id, arguments))
        return out

    def _call_of(self, item: _Item) -> str:
        if item.call_id is None:
            raise InvalidResponse(f"{ORIGIN} sent arguments for a function call that never started ({item.id})")
        return item.call_id

    def _arguments_done(self, item: _Item, arguments: str) -> list[LlmEvent]:
        call_id = self._call_of(item)
        if item.ended:
            return []
        out: list[LlmEvent] = []
        if not item.arguments and arguments:  # a server that sends the arguments only whole
            out.append(ToolCallDelta(call_id, arguments))
        item.arguments = item.ended = True
        out.append(ToolCallEnd(call_id))
        return out

    def _item_done(self, item: _Item, raw: dict[str, Any], whole: _OutputItem) -> list[LlmEvent]:
        """A complete output item (``raw`` as it came): what of it was not told yet, and the end of a call or a
        reasoning block."""
        if item.done:
            return []
        item.done = True
        if whole.type == "function_call":
            return self._call_started(item, whole) + self._arguments_done(item, whole.arguments or "")
        if whole.type == "reasoning":
            return self._reasoning_done(item, raw, whole)
        if whole.type != "message":
            return []
        out = []
        for part, content in enumerate(whole.content or ()):
            field = _TEXT_FIELDS.get(content.type or "") if content is not None else None
            if content is not None and field is not None and ("content", part) not in item.told:
                text = content.refusal if field == "refusal" else content.text
                out += self._said(item, part, text or "", field == "refusal")
        return out

    def _reasoning_done(self, item: _Item, raw: dict[str, Any], whole: _OutputItem) -> list[LlmEvent]:
        text = "" if item.told else reasoning_text(whole)
        encrypted = whole.encrypted_content or ""
        if not text and not encrypted and not item.told:
            return []  # nothing to show and nothing to send back
        summary = raw.get("summary") or []
        data: dict[str, Any] = {"origin": ORIGIN, "id": whole.id or item.id or None, "summary": summary}
        return [ThinkingDelta(text, signature=encrypted, provider_data=data)]

    def _complete(self, response: _Response) -> list[LlmEvent]:
        """The final response: items not told yet, calls left open, then the finish and the usage."""
        out = self._start(None, "response") if not self._started else []
        if out:
            out = [StreamStart(model=response.model or None, response_id=response.id or None)]
        for position, raw in enumerate(response.output or ()):
            raw = raw or {}
            whole = _ITEM.of(raw, ORIGIN, f"response.output[{position}]")
            item = self._by_id.get(whole.id) if whole.id else None
            out += self._item_done(item or self._find(position, whole.id or ""), raw, whole)
        finish = finish_reason(response, called=any(item.call_id for item in self._items))
        if finish != "length":
            for item in self._items:
                if item.call_id is not None and not item.ended:
                    item.ended = True
                    out.append(ToolCallEnd(item.call_id))
        out.append(StreamEnd(finish, usage_of(response.usage)))
        self._finished = True
        return out

    # --- event handlers (kind -> events) ------------------------------------------------------------------

    def _on_text_delta(self, event: _Event, kind: str) -> list[LlmEvent]:
        part = event.content_index or 0
        return self._said(self._item_of(event), part, event.delta or "", "refusal" in kind)

    def _on_text_done(self, event: _Event, kind: str) -> list[LlmEvent]:
        item, part = self._item_of(event), event.content_index or 0
        if ("content", part) in item.told:
            return []
        refusal = "refusal" in kind
        return self._said(item, part, (event.refusal if refusal else event.text) or "", refusal)

    def _on_part_done(self, event: _Event, kind: str) -> list[LlmEvent]:
        """``content_part.done`` / ``reasoning_summary_part.done``: a whole part, read if no delta told it."""
        item, content = self._item_of(event), _PART.of(event.part or {}, ORIGIN, f"{kind}.part")
        if content.type == "summary_text" or content.type == "reasoning_text":
            field = "summary" if content.type == "summary_text" else "reasoning"
            part = (event.summary_index if field == "summary" else event.content_index) or 0
            return self._thinking_done(item, field, part, content.text or "")
        text_field = _TEXT_FIELDS.get(content.type or "")
        part = event.content_index or 0
        if text_field is None or ("content", part) in item.told:
            return []
        text = content.refusal if text_field == "refusal" else content.text
        return self._said(item, part, text or "", text_field == "refusal")

    def _on_thinking_delta(self, event: _Event, kind: str) -> list[LlmEvent]:
        field = "summary" if "summary" in kind else "reasoning"
        part = (event.summary_index if field == "summary" else event.content_index) or 0
        return [ThinkingDelta(self._thought(self._item_of(event), field, part, event.delta or ""))]

    def _on_thinking_done(self, event: _Event, kind: str) -> list[LlmEvent]:
        field = "summary" if "summary" in kind else "reasoning"
        part = (event.summary_index if field == "summary" else event.content_index) or 0
        return self._thinking_done(self._item_of(event), field, part, event.text or "")

    def _thinking_done(self, item: _Item, field: str, part: int, text: str) -> list[LlmEvent]:
        if (field, part) in item.told or not text:
            return []
        return [ThinkingDelta(self._thought(item, field, part, text))]

    def _on_arguments_delta(self, event: _Event, kind: str) -> list[LlmEvent]:
        item = self._item_of(event)
        call_id = self._call_of(item)
        item.arguments = True
        return [ToolCallDelta(call_id, event.delta or "")]

    def _on_arguments_done(self, event: _Event, kind: str) -> list[LlmEvent]:
        return self._arguments_done(self._item_of(event), event.arguments or "")

    def _on_item_added(self, event: _Event, kind: str) -> list[LlmEvent]:
        whole = _ITEM.of(event.item or {}, ORIGIN, f"{kind}.item")
        item = self._find(event.output_index, whole.id or "", new=True)
        if whole.type != "function_call":
            return []
        return self._call_started(item, whole)

    def _on_item_done(self, event: _Event, kind: str) -> list[LlmEvent]:
        raw = event.item or {}
        whole = _ITEM.of(raw, ORIGIN, f"{kind}.item")
        return self._item_done(self._find(event.output_index, whole.id or ""), raw, whole)

    def _on_completed(self, event: _Event, kind: str) -> list[LlmEvent]:
        return self._complete(_RESPONSE.of(event.response or {}, ORIGIN, "response"))

    def _on_incomplete(self, event: _Event, kind: str) -> list[LlmEvent]:
        return self._complete(_RESPONSE.of({"status": "incomplete", **(event.response or {})}, ORIGIN, "response"))

    def _on_failed(self, event: _Event, kind: str) -> list[LlmEvent]:
        raise failure(_RESPONSE.of(event.response or {}, ORIGIN, "response").error)


_HANDLERS: dict[str, Callable[[ResponsesDecoder, _Event, str], list[LlmEvent]]] = {
    "response.output_text.delta": ResponsesDecoder._on_text_delta,
    "response.refusal.delta": ResponsesDecoder._on_text_delta,
    "response.output_text.done": ResponsesDecoder._on_text_done,
    "response.refusal.done": ResponsesDecoder._on_text_done,
    "response.content_part.done": ResponsesDecoder._on_part_done,
    "response.reasoning_summary_part.done": ResponsesDecoder._on_part_done,
    "response.reasoning_summary_text.delta": ResponsesDecoder._on_thinking_delta,
    "response.reasoning_text.delta": ResponsesDecoder._on_thinking_delta,
    "response.reasoning_summary_text.done": ResponsesDecoder._on_thinking_done,
    "response.reasoning_text.done": ResponsesDecoder._on_thinking_done,
    "response.function_call_arguments.delta": ResponsesDecoder._on_arguments_delta,
    "response.function_call_arguments.done": ResponsesDecoder._on_arguments_done,
    "response.output_item.added": ResponsesDecoder._on_item_added,
    "response.output_item.done": ResponsesDecoder._on_item_done,
    "response.completed": ResponsesDecoder._on_completed,
    "response.incomplete": ResponsesDecoder._on_incomplete,
    "response.failed": ResponsesDecoder._on_failed,
}
"""The events a turn needs (and ``error``, raised as it comes); every other event type is ignored (module
docstring)."""


def reasoning_text(item: _OutputItem) -> str:
    """A whole reasoning item's readable text: its summary parts, else its reasoning text, separated alike."""
    for parts, kind in ((item.summary, "summary_text"), (item.content, "reasoning_text")):
        texts = [part.text or "" for part in parts or () if part is not None and part.type == kind]
        if any(texts):
            return SUMMARY_SEPARATOR.join(texts)
    return ""


def finish_reason(response: _Response, *, called: bool) -> FinishReason:
    """``length`` or ``content_filter`` for an incomplete response, ``tool_calls`` when it called a function."""
    status = response.status or ""
    if status == "incomplete":
        details = response.incomplete_details
        return _INCOMPLETE.get(details.reason or "" if details is not None else "", "other")
    if status not in ("", "completed"):
        return "other"
    return "tool_calls" if called else "stop"


def parse_usage(usage: dict[str, Any]) -> Usage:
    """Responses usage from its JSON; a details field that is not an object is ``InvalidResponse``."""
    return usage_of(_USAGE.of(usage, ORIGIN, "usage"))


def usage_of(usage: _Usage | None) -> Usage:
    """Responses usage; cached input tokens counted apart, reasoning tokens as part of the output. Counts are
    read forgivingly (:func:`~tether.providers.wire.as_count`)."""
    if usage is None:
        return NO_USAGE
    cached = as_count(usage.input_tokens_details.cached_tokens if usage.input_tokens_details else None)
    reasoning = usage.output_tokens_details.reasoning_tokens if usage.output_tokens_details else None
    return Usage(
        input_tokens=max(as_count(usage.input_tokens) - cached, 0),
        output_tokens=as_count(usage.output_tokens),
        cache_read_tokens=cached,
        reasoning_tokens=as_count(reasoning),
    )


def failure(error: Any) -> ProviderError:
    """The ``ProviderError`` for a failed response or an ``error`` event: the whole error object goes to
    ``error_for_payload``, marked as ``invalid_request_error`` first when its code is one that names something
    in the request (``error_for_payload`` reads unknown codes as the provider's fault)."""
    fields = dict(error) if type(error) is dict else {"message": str(error or "the response failed")}
    fields.pop("sequence_number", None)
    if fields.get("type") == "error":
        del fields["type"]
    code = fields.get("code")
    if isinstance(code, str) and code in _REQUEST_SIDE_FAILURES and not fields.get("type"):
        fields["type"] = "invalid_request_error"
    return error_for_payload(ORIGIN, {"error": fields})
