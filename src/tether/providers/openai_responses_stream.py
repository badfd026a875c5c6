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
* Every field is read with the typed readers of :mod:`tether.providers.wire`: a value of the wrong JSON type
  is ``InvalidResponse`` naming the field, so no event carries a wrongly typed value. Nothing after the final
  response counts.
"""

from __future__ import annotations

import uuid
from typing import Any

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
from tether.providers.decoding import unfinished
from tether.providers.http import error_for_payload
from tether.providers.wire import as_count, as_list, as_object, as_text, malformed
from tether.usage import Usage

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


def _text(data: dict[str, Any], field: str, where: str) -> str:
    return as_text(data.get(field), ORIGIN, f"{where}.{field}")


def _object(data: dict[str, Any], field: str, where: str) -> dict[str, Any]:
    return as_object(data.get(field), ORIGIN, f"{where}.{field}")


def _index(data: dict[str, Any], field: str, where: str) -> int | None:
    value = data.get(field)
    if value is None:
        return None
    if type(value) is not int:
        raise malformed(ORIGIN, f"{where}.{field}", value)
    return value


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

    def __init__(self) -> None:
        self._started = False
        self._finished = False
        self._items: list[_Item] = []
        self._by_index: dict[int, _Item] = {}
        self._by_id: dict[str, _Item] = {}

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed event (or of a whole response, from a server that ignored streaming)."""
        if type(data) is not dict:
            raise malformed(ORIGIN, "the event", data)
        if data.get("type") is None:
            return self.whole(data)
        kind = _text(data, "type", "event")
        if self._finished:
            return []  # nothing counts after the final response
        out = self._start(_object(data, "response", kind))
        handler = _HANDLERS.get(kind)
        if handler is not None:
            out += handler(self, data, kind)
        return out

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) response."""
        if type(data) is not dict:
            raise malformed(ORIGIN, "the response", data)
        if _text(data, "status", "response") == "failed" or (data.get("error") and "output" not in data):
            raise failure(data.get("error"))
        if type(data.get("output")) is not list:
            raise InvalidResponse(f"{ORIGIN} sent a response without output: {str(data)[:200]}")
        return self._complete(data)

    def end(self) -> list[LlmEvent]:
        """After the last event: nothing more, or the error of a stream that stopped before its end."""
        if self._finished:
            return []
        raise unfinished(ORIGIN, started=self._started)

    # --- items --------------------------------------------------------------------------------------------

    def _start(self, response: dict[str, Any]) -> list[LlmEvent]:
        if self._started:
            return []
        self._started = True
        model, response_id = _text(response, "model", "response"), _text(response, "id", "response")
        return [StreamStart(model=model or None, response_id=response_id or None)]

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

    def _item_of(self, data: dict[str, Any], where: str) -> _Item:
        """The item an event is about, by its ``output_index`` or its ``item_id``; an event that names neither
        is about the item told last (or the first)."""
        index, item_id = _index(data, "output_index", where), _text(data, "item_id", where)
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

    def _call_started(self, item: _Item, call: dict[str, Any], where: str) -> list[LlmEvent]:
        if item.call_id is not None:
            return []
        item.call_id = call_id = _text(call, "call_id", where) or f"call_{uuid.uuid4().hex[:24]}"
        data = {"origin": ORIGIN, "id": item.id} if item.id else None
        out: list[LlmEvent] = [ToolCallStart(call_id, _text(call, "name", where), item.index, data)]
        if arguments := _text(call, "arguments", where):
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

    def _item_done(self, item: _Item, whole: dict[str, Any], where: str) -> list[LlmEvent]:
        """A complete output item: what of it was not told yet, and the end of a call or a reasoning block."""
        kind = _text(whole, "type", where)
        if item.done:
            return []
        item.done = True
        if kind == "function_call":
            out = self._call_started(item, whole, where)
            return out + self._arguments_done(item, _text(whole, "arguments", where))
        if kind == "reasoning":
            return self._reasoning_done(item, whole, where)
        if kind != "message":
            return []
        out = []
        for part, raw in enumerate(as_list(whole.get("content"), ORIGIN, f"{where}.content")):
            content = as_object(raw, ORIGIN, f"{where}.content[{part}]")
            field = _TEXT_FIELDS.get(_text(content, "type", f"{where}.content[{part}]"))
            if field is not None and ("content", part) not in item.told:
                text = _text(content, field, f"{where}.content[{part}]")
                out += self._said(item, part, text, field == "refusal")
        return out

    def _reasoning_done(self, item: _Item, whole: dict[str, Any], where: str) -> list[LlmEvent]:
        text = reasoning_text(whole, where)
        text = "" if item.told else text
        encrypted = _text(whole, "encrypted_content", where)
        if not text and not encrypted and not item.told:
            return []  # nothing to show and nothing to send back
        summary = as_list(whole.get("summary"), ORIGIN, f"{where}.summary")
        item_id = _text(whole, "id", where) or item.id or None
        data: dict[str, Any] = {"origin": ORIGIN, "id": item_id, "summary": summary}
        return [ThinkingDelta(text, signature=encrypted, provider_data=data)]

    def _complete(self, response: dict[str, Any]) -> list[LlmEvent]:
        """The final response: items not told yet, calls left open, then the finish and the usage."""
        out = self._start(response)
        for position, raw in enumerate(as_list(response.get("output"), ORIGIN, "response.output")):
            where = f"response.output[{position}]"
            whole = as_object(raw, ORIGIN, where)
            item_id = _text(whole, "id", where)
            item = self._by_id.get(item_id) if item_id else None
            out += self._item_done(item or self._find(position, item_id), whole, where)
        finish = finish_reason(response, called=any(item.call_id for item in self._items))
        if finish != "length":
            for item in self._items:
                if item.call_id is not None and not item.ended:
                    item.ended = True
                    out.append(ToolCallEnd(item.call_id))
        out.append(StreamEnd(finish, parse_usage(_object(response, "usage", "response"))))
        self._finished = True
        return out

    # --- event handlers (kind -> events) ------------------------------------------------------------------

    def _on_text_delta(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        part = _index(data, "content_index", kind) or 0
        return self._said(self._item_of(data, kind), part, _text(data, "delta", kind), "refusal" in kind)

    def _on_text_done(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        item, part = self._item_of(data, kind), _index(data, "content_index", kind) or 0
        if ("content", part) in item.told:
            return []
        refusal = "refusal" in kind
        return self._said(item, part, _text(data, "refusal" if refusal else "text", kind), refusal)

    def _on_part_done(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        """``content_part.done`` / ``reasoning_summary_part.done``: a whole part, read if no delta told it."""
        item, content = self._item_of(data, kind), _object(data, "part", kind)
        part_type = _text(content, "type", f"{kind}.part")
        if part_type == "summary_text" or part_type == "reasoning_text":
            field = "summary" if part_type == "summary_text" else "reasoning"
            part = _index(data, "summary_index" if field == "summary" else "content_index", kind) or 0
            return self._thinking_done(item, field, part, _text(content, "text", f"{kind}.part"))
        text_field = _TEXT_FIELDS.get(part_type)
        part = _index(data, "content_index", kind) or 0
        if text_field is None or ("content", part) in item.told:
            return []
        return self._said(item, part, _text(content, text_field, f"{kind}.part"), text_field == "refusal")

    def _on_thinking_delta(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        field = "summary" if "summary" in kind else "reasoning"
        part = _index(data, "summary_index" if field == "summary" else "content_index", kind) or 0
        return [ThinkingDelta(self._thought(self._item_of(data, kind), field, part, _text(data, "delta", kind)))]

    def _on_thinking_done(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        field = "summary" if "summary" in kind else "reasoning"
        part = _index(data, "summary_index" if field == "summary" else "content_index", kind) or 0
        return self._thinking_done(self._item_of(data, kind), field, part, _text(data, "text", kind))

    def _thinking_done(self, item: _Item, field: str, part: int, text: str) -> list[LlmEvent]:
        if (field, part) in item.told or not text:
            return []
        return [ThinkingDelta(self._thought(item, field, part, text))]

    def _on_arguments_delta(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        item = self._item_of(data, kind)
        call_id = self._call_of(item)
        item.arguments = True
        return [ToolCallDelta(call_id, _text(data, "delta", kind))]

    def _on_arguments_done(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        return self._arguments_done(self._item_of(data, kind), _text(data, "arguments", kind))

    def _on_item_added(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        whole, where = _object(data, "item", kind), f"{kind}.item"
        item = self._find(_index(data, "output_index", kind), _text(whole, "id", where), new=True)
        if _text(whole, "type", where) != "function_call":
            return []
        return self._call_started(item, whole, where)

    def _on_item_done(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        whole, where = _object(data, "item", kind), f"{kind}.item"
        item = self._find(_index(data, "output_index", kind), _text(whole, "id", where))
        return self._item_done(item, whole, where)

    def _on_completed(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        return self._complete(_object(data, "response", kind))

    def _on_incomplete(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        return self._complete({"status": "incomplete", **_object(data, "response", kind)})

    def _on_failed(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        raise failure(_object(data, "response", kind).get("error"))

    def _on_error(self, data: dict[str, Any], kind: str) -> list[LlmEvent]:
        inner = data.get("error")
        raise failure(inner if type(inner) is dict else data)


_HANDLERS = {
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
    "error": ResponsesDecoder._on_error,
}
"""The events a turn needs; every other event type is ignored (module docstring)."""


def reasoning_text(item: dict[str, Any], where: str = "item") -> str:
    """A whole reasoning item's readable text: its summary parts, else its reasoning text, separated alike."""
    for field, kind in (("summary", "summary_text"), ("content", "reasoning_text")):
        texts = []
        for position, raw in enumerate(as_list(item.get(field), ORIGIN, f"{where}.{field}")):
            part = as_object(raw, ORIGIN, f"{where}.{field}[{position}]")
            if _text(part, "type", f"{where}.{field}[{position}]") == kind:
                texts.append(_text(part, "text", f"{where}.{field}[{position}]"))
        if any(texts):
            return SUMMARY_SEPARATOR.join(texts)
    return ""


def finish_reason(response: dict[str, Any], *, called: bool) -> FinishReason:
    """``length`` or ``content_filter`` for an incomplete response, ``tool_calls`` when it called a function."""
    status = _text(response, "status", "response")
    if status == "incomplete":
        details = _object(response, "incomplete_details", "response")
        return _INCOMPLETE.get(_text(details, "reason", "response.incomplete_details"), "other")
    if status not in ("", "completed"):
        return "other"
    return "tool_calls" if called else "stop"


def parse_usage(usage: dict[str, Any]) -> Usage:
    """Responses usage; cached input tokens counted apart, reasoning tokens as part of the output. Counts are
    read forgivingly (:func:`~tether.providers.wire.as_count`)."""
    cached = as_count(_object(usage, "input_tokens_details", "usage").get("cached_tokens"))
    return Usage(
        input_tokens=max(as_count(usage.get("input_tokens")) - cached, 0),
        output_tokens=as_count(usage.get("output_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=as_count(_object(usage, "output_tokens_details", "usage").get("reasoning_tokens")),
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
