"""Anthropic Messages answers, streamed or whole, read into tether's ``LlmEvent``s.

One decoder reads a response's server-sent events (``message_start``, ``content_block_start`` / ``_delta`` /
``_stop``, ``message_delta``, ``message_stop``). ``message_start`` may already carry the whole answer (its
``content`` blocks and ``stop_reason`` filled in, as programmatic tool calling sends it): those blocks are
read as if each had streamed whole, then whatever deltas follow. A whole (non-streamed) message is read the
same way, as a ``message_start`` carrying everything, so both paths give the same events. Per content block:

* ``text``: ``TextDelta``s (citations and ``citations_delta`` are not kept).
* ``tool_use``: ``ToolCallStart`` (``index`` is the call's position among the turn's calls), its
  ``input_json_delta`` pieces as ``ToolCallDelta``s, ``ToolCallEnd`` at ``content_block_stop``. The
  ``caller`` of a call made from code (programmatic tool calling; not ``{"type": "direct"}``) rides in
  ``provider_data`` as ``{"origin": "anthropic", "caller": {...}}``, to go back with the call.
* ``thinking``: ``ThinkingDelta``s, then the ``signature_delta`` as ``ThinkingDelta("", signature=...)``
  marked ``{"origin": "anthropic"}``, which closes the block (``StreamAccumulator``).
* ``redacted_thinking``: one ``ThinkingDelta("", signature=<data>)`` marked ``{"origin": "anthropic",
  "redacted": True}``, so that it becomes a closed ``Thinking`` part and can be sent back as it came.
* any other block (``server_tool_use``, ``web_search_tool_result`` and the other ``*_tool_result`` blocks,
  ``container_upload``, ``compaction``, ...): run by Anthropic, not by us, so never a tool call and never
  shown. The API wants these back unchanged on the next request, so the block is kept whole in
  ``StreamEnd.provider_data["server_blocks"]``, with its place among the turn's parts (:class:`Anchor`):
  its streamed ``input_json_delta`` pieces are assembled into ``input``, and a ``compaction`` block's
  ``compaction_delta`` pieces into ``content`` (``null`` stays ``null``: a failed compaction), its
  ``encrypted_content`` the last one sent.

Every field read is typed (the wire shapes below, read by :class:`~tether.providers.wire.Shape`): a field of the
wrong JSON type is ``invalid_response`` naming it, so nothing wrongly typed reaches an event. ``ping``,
``message_stop`` and unknown events or delta types are ignored; an ``error`` event is raised as the
``ProviderError`` its type names (``overloaded_error`` -> ``provider_unavailable``). Stop reasons: ``end_turn`` and
``stop_sequence`` -> ``stop``, ``tool_use`` -> ``tool_calls``, ``max_tokens`` and ``model_context_window_exceeded``
-> ``length``, ``refusal`` -> ``content_filter``, ``pause_turn`` (a server tool's loop paused; sending the turn back
resumes it), ``compaction`` (paused after compacting) and anything new -> ``other``. Usage: ``input_tokens`` (cache
reads and writes excluded, as Anthropic counts them), ``output_tokens``, ``cache_read_input_tokens`` ->
``cache_read_tokens``, ``cache_creation_input_tokens`` -> ``cache_write_tokens`` (of which
``cache_creation.ephemeral_1h_input_tokens`` -> ``cache_write_1h_tokens``, the writes of a 1-hour TTL), each through
:func:`~tether.providers.wire.as_count`; a count ``message_delta`` carries (cumulative) replaces the one
``message_start`` sent, a ``null`` one does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tether.errors import InvalidResponse
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
from tether.providers.wire import Shape, anchored_entries, as_count, malformed
from tether.usage import Usage

ORIGIN = "anthropic"
"""``provider_data["origin"]`` of the data this provider needs back."""

STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "pause_turn": "other",
    "compaction": "other",
}
CLIENT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
"""Block types that become tether parts; every other type is a server block."""


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a server block sat in its turn: after ``parts`` non-text parts (thinking blocks and tool calls)
    and ``chars`` characters of text. Text blocks around a server block are merged into one ``Text`` part;
    the character count says where to cut it again."""

    parts: int
    chars: int


@dataclass(slots=True)
class _Block:
    """A content block being streamed."""

    kind: str
    start: dict[str, Any]
    call_id: str | None = None
    pieces: list[str] = field(default_factory=list)
    """``input_json_delta`` pieces."""
    content: list[str] = field(default_factory=list)
    """``compaction_delta`` pieces."""
    encrypted: str | None = None
    """The last ``encrypted_content`` a ``compaction_delta`` sent."""
    signed: bool = False


# --- the wire shapes ------------------------------------------------------------------------------------------


class _Event(msgspec.Struct, gc=False):
    """A stream event (or a whole message: ``type`` ``message``); its parts are read by the shapes below, by the
    event's type."""

    type: str | None = None
    index: Any = None
    delta: Any = None
    content_block: Any = None
    message: Any = None
    usage: Any = None
    error: Any = None


class _Message(msgspec.Struct, gc=False):
    """``message_start``'s message, or a whole one: blocks are read by their type (:data:`_BLOCKS`)."""

    id: str | None = None
    model: str | None = None
    content: list[dict[str, Any]] | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None


class _Typed(msgspec.Struct, gc=False):
    type: str | None = None


class _Text(msgspec.Struct, gc=False):
    text: str | None = None


class _Thinking(msgspec.Struct, gc=False):
    thinking: str | None = None
    signature: str | None = None


class _Redacted(msgspec.Struct, gc=False):
    data: str | None = None


class _ToolUse(msgspec.Struct, gc=False):
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    caller: dict[str, Any] | None = None


class _Compaction(msgspec.Struct, gc=False):
    content: str | None = None
    encrypted_content: str | None = None


class _Delta(msgspec.Struct, gc=False):
    """A ``content_block_delta``'s delta, whatever its type (each type reads its own field)."""

    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    partial_json: str | None = None
    content: str | None = None
    encrypted_content: str | None = None


class _MessageDelta(msgspec.Struct, gc=False):
    stop_reason: str | None = None


_EVENT = Shape(_Event, "the event")
_MESSAGE = Shape(_Message, "the message")
_TYPED = Shape(_Typed, "the block")
_DELTA = Shape(_Delta, "the delta")
_MESSAGE_DELTA = Shape(_MessageDelta, "the delta")
_USAGE = Shape(dict[str, Any], "usage")
_BLOCKS: dict[str, Shape[Any]] = {
    "text": Shape(_Text, "the block"),
    "thinking": Shape(_Thinking, "the block"),
    "redacted_thinking": Shape(_Redacted, "the block"),
    "tool_use": Shape(_ToolUse, "the block"),
    "compaction": Shape(_Compaction, "the block"),
}
"""The blocks whose fields are read, by type; any other block is a server's, kept whole."""


class AnthropicDecoder:
    """Anthropic stream events (or one whole message) to ``LlmEvent``s, for one response: a
    :class:`~tether.providers.decoding.Decoder`. Each event is read into the wire shapes above: a field of
    the wrong JSON type is an ``InvalidResponse`` naming it (after the event's type: ``message_start.message``)."""

    __slots__ = (
        "_anchor",
        "_blocks",
        "_calls",
        "_complete",
        "_finish",
        "_server_blocks",
        "_started",
        "_usage",
        "provider",
    )

    def __init__(self, provider: str = ORIGIN) -> None:
        self.provider = provider
        self._started = False
        self._blocks: dict[int, _Block] = {}
        self._calls = 0
        self._anchor = Anchor(0, 0)
        self._server_blocks: list[dict[str, Any]] = []
        self._finish: FinishReason | None = None
        self._complete = False  # message_stop came, or the answer came whole
        self._usage: dict[str, int] = {}

    def feed_json(self, text: str | bytes) -> list[LlmEvent]:
        """The events of one server-sent event's JSON text."""
        return self._event(_EVENT.of_text(text, self.provider, "event"), lambda: parse_json_text(text, self.provider))

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one server-sent event's JSON data."""
        if type(data) is not dict:
            raise InvalidResponse(f"{self.provider} sent an event that is not a JSON object: {str(data)[:200]}")
        return self._event(_EVENT.of(data, self.provider, "event"), lambda: data)

    def _event(self, event: _Event, data: Callable[[], dict[str, Any]]) -> list[LlmEvent]:
        """The events of ``event``; ``data()`` is its JSON (a whole message's fields are more than an event's)."""
        kind = event.type
        if kind == "content_block_delta":
            delta = _DELTA.of(event.delta or {}, self.provider, "content_block_delta.delta")
            return self._delta(self._index(event.index, kind), delta)
        if kind == "content_block_start":
            where = "content_block_start.content_block"
            block = self._object(event.content_block, where)
            return self._start(self._index(event.index, kind), block, where)
        if kind == "content_block_stop":
            return self._stop(self._index(event.index, kind))
        if kind == "message_start":
            return self._message(self._object(event.message, "message_start.message"), "message_start.message")
        if kind == "message_delta":
            self._read_usage(event.usage, "message_delta.usage")
            self._read_stop(_MESSAGE_DELTA.of(event.delta or {}, self.provider, "message_delta.delta").stop_reason)
            return []
        if kind == "error":
            raise error_for_payload(self.provider, {"type": "error", "error": event.error})
        if kind == "message":  # a whole answer where a stream was asked for
            self._complete = True
            return self._message(data(), "message")
        if kind == "message_stop":
            self._complete = True
        return []  # ping, message_stop, and event types added after this was written

    def whole_json(self, body: str | bytes) -> list[LlmEvent]:
        return self.whole(parse_json_text(body, self.provider, "a body"))

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) message, ``StreamEnd`` included."""
        if type(data) is not dict:
            raise InvalidResponse(f"{self.provider} sent an answer that is not a JSON object: {str(data)[:200]}")
        if data.get("type") == "error":
            raise error_for_payload(self.provider, data)
        self._complete = True
        return self._message(data, "message") + self.end()

    def end(self) -> list[LlmEvent]:
        """Close the blocks left open and the turn. Without a stop reason: an answer that says it is complete
        (``message_stop``, or a whole message) is malformed, ``invalid_response``; a stream that just stopped
        was cut, a ``transport`` error."""
        if self._finish is None:
            raise unfinished(self.provider, started=self._started, whole=self._complete, missing="stop_reason")
        out: list[LlmEvent] = []
        if self._finish != "length":  # a call cut off by the output limit stays open: it is never run
            for index in list(self._blocks):
                out += self._stop(index)
        data: dict[str, Any] | None = None
        if self._server_blocks:
            data = {"origin": ORIGIN, "server_blocks": self._server_blocks}
        out.append(StreamEnd(self._finish, self.usage(), data))
        return out

    def usage(self) -> Usage:
        """The usage reported so far; ``input_tokens`` excludes cache reads and writes, as Anthropic counts."""
        usage = self._usage
        return Usage(
            input_tokens=usage.get("input_tokens", 0),
            output_tokens=usage.get("output_tokens", 0),
            cache_read_tokens=usage.get("cache_read_input_tokens", 0),
            cache_write_tokens=usage.get("cache_creation_input_tokens", 0),
            cache_write_1h_tokens=usage.get(_HOUR, 0),
        )

    # --- reading fields -----------------------------------------------------------------------------------

    def _object(self, value: Any, what: str) -> dict[str, Any]:
        """``value`` as a JSON object (``None`` reads as empty)."""
        if value is None:
            return {}
        if type(value) is not dict:
            raise malformed(self.provider, what, value)
        return value

    def _index(self, index: Any, what: str) -> int:
        if type(index) is not int or index < 0:
            raise malformed(self.provider, f"{what}.index", index)
        return index

    # --- events -------------------------------------------------------------------------------------------

    def _message(self, data: dict[str, Any], what: str) -> list[LlmEvent]:
        """A message's start, and whatever it already carries: usage, whole content blocks, a stop reason."""
        message = _MESSAGE.of(data, self.provider, what)
        out: list[LlmEvent] = []
        if not self._started:
            self._started = True
            out.append(StreamStart(message.model or None, message.id or None))
        self._read_usage(message.usage, f"{what}.usage")
        for position, block in enumerate(message.content or ()):
            at = -1 - position  # whole blocks start and stop at once, apart from the indexes a stream uses
            out += self._start(at, block, f"{what}.content[{position}]")
            out += self._stop(at)
        self._read_stop(message.stop_reason)
        return out

    def _read_stop(self, reason: str | None) -> None:
        if reason:
            self._finish = STOP_REASONS.get(reason, "other")

    def _read_usage(self, value: Any, what: str) -> None:
        """``message_delta`` counts are cumulative: a field it carries replaces the one ``message_start`` sent."""
        for key, count in (_USAGE.of(value, self.provider, what) if value is not None else {}).items():
            if key in _COUNTS and count is not None:
                self._usage[key] = as_count(count)
            elif key == "cache_creation" and isinstance(count, dict):  # the writes by TTL: the 1-hour ones
                hour = count.get("ephemeral_1h_input_tokens")
                if hour is not None:
                    self._usage[_HOUR] = as_count(hour)

    def _start(self, at: int, block: dict[str, Any], what: str) -> list[LlmEvent]:
        kind = _TYPED.of(block, self.provider, what).type or ""
        if at in self._blocks:
            raise InvalidResponse(f"{self.provider} started content block {at} twice")
        state = self._blocks[at] = _Block(kind, block)
        out: list[LlmEvent] = [] if self._started else self._message({}, "message")
        shape = _BLOCKS.get(kind)
        read = shape.of(block, self.provider, what) if shape is not None else None
        if type(read) is _Text:
            out += self._text_delta(read.text or "")
        elif type(read) is _Thinking:
            out += self._thinking(read.thinking or "")
        elif type(read) is _ToolUse:
            call_id = read.id or f"toolu_{self._calls}"
            state.call_id = call_id
            out.append(ToolCallStart(call_id, read.name or "", self._calls, self._caller_data(read.caller or {})))
            self._calls += 1
            self._anchor = Anchor(self._anchor.parts + 1, self._anchor.chars)
        return out

    def _caller_data(self, caller: dict[str, Any]) -> dict[str, Any] | None:
        """A call's ``provider_data``: the ``caller`` of a call made from code; none for a direct call."""
        return {"origin": ORIGIN, "caller": caller} if caller and caller.get("type") != "direct" else None

    def _delta(self, at: int, delta: _Delta) -> list[LlmEvent]:
        block = self._blocks.get(at)
        if block is None:
            raise InvalidResponse(f"{self.provider} continued content block {at} before starting it")
        kind = delta.type
        if kind == "text_delta" and block.kind == "text":
            return self._text_delta(delta.text or "")
        if kind == "thinking_delta" and block.kind == "thinking":
            return self._thinking(delta.thinking or "")
        if kind == "signature_delta" and block.kind == "thinking":
            block.signed = True
            return self._signature(delta.signature or "")
        if kind == "input_json_delta" and (piece := delta.partial_json):
            block.pieces.append(piece)
            if block.call_id is not None:
                return [ToolCallDelta(block.call_id, piece)]
        if kind == "compaction_delta" and block.kind == "compaction":
            if piece := delta.content:
                block.content.append(piece)
            if encrypted := delta.encrypted_content:
                block.encrypted = encrypted
        return []  # citations, and delta types added after this was written

    def _stop(self, at: int) -> list[LlmEvent]:
        block = self._blocks.pop(at, None)
        if block is None:
            raise InvalidResponse(f"{self.provider} stopped content block {at} before starting it")
        if block.call_id is not None:
            out: list[LlmEvent] = []
            if not block.pieces:  # a whole answer, or a call without arguments: its input came with its start
                arguments = json.dumps(block.start.get("input") or {}, ensure_ascii=False)
                out.append(ToolCallDelta(block.call_id, arguments))
            return [*out, ToolCallEnd(block.call_id)]
        if block.kind == "thinking":
            signature = block.start.get("signature")
            return self._signature(signature) if signature and not block.signed else []
        if block.kind == "redacted_thinking":
            self._anchor = Anchor(self._anchor.parts + 1, self._anchor.chars)
            marked = {"origin": ORIGIN, "redacted": True}
            return [ThinkingDelta("", signature=block.start.get("data") or "", provider_data=marked)]
        if block.kind not in CLIENT_BLOCKS:
            self._server_blocks.append(
                {"anchor": [self._anchor.parts, self._anchor.chars], "block": self._whole(block)}
            )
        return []

    def _text_delta(self, text: str) -> list[LlmEvent]:
        if not text:
            return []
        self._anchor = Anchor(self._anchor.parts, self._anchor.chars + len(text))
        return [TextDelta(text)]

    def _thinking(self, text: str) -> list[LlmEvent]:
        return [ThinkingDelta(text)] if text else []

    def _signature(self, signature: str) -> list[LlmEvent]:
        self._anchor = Anchor(self._anchor.parts + 1, self._anchor.chars)
        return [ThinkingDelta("", signature=signature, provider_data={"origin": ORIGIN})]

    def _whole(self, block: _Block) -> dict[str, Any]:
        """A server block as it is sent back: its start, with what its deltas streamed."""
        whole = dict(block.start)
        if block.pieces:
            raw = "".join(block.pieces)
            try:
                whole["input"] = msgspec.json.decode(raw)
            except ValueError:
                raise InvalidResponse(f"the input of a {block.kind} block is not JSON: {raw[:200]!r}") from None
        if block.content:
            whole["content"] = (whole.get("content") or "") + "".join(block.content)
        if block.encrypted is not None:
            whole["encrypted_content"] = block.encrypted
        return whole


_COUNTS = frozenset({"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"})
"""The usage fields read as they are; ``cache_creation`` (the writes by TTL) gives :data:`_HOUR`; the others
(``server_tool_use``, ...) are not counts of ours."""
_HOUR = "cache_creation.ephemeral_1h_input_tokens"
"""The 1-hour cache writes (``usage.cache_creation.ephemeral_1h_input_tokens``), part of the cache writes."""


def as_stream_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream events that would have delivered a whole ``message``: each block starts whole and stops."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {k: v for k, v in message.items() if k not in ("content", "type")}}
    ]
    for index, block in enumerate(message.get("content") or ()):
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    events.append({"type": "message_delta", "delta": delta, "usage": message.get("usage") or {}})
    events.append({"type": "message_stop"})
    return events


def anchors_of(provider_data: dict[str, Any] | None) -> list[tuple[Anchor, dict[str, Any]]]:
    """The server blocks kept on an assistant message of ours, with their places, in order. An entry that is
    not of the shape :class:`AnthropicDecoder` writes (a hand-edited session) is left out rather than sent."""
    entries = anchored_entries(provider_data, ORIGIN, "server_blocks", "block")
    return [(Anchor(parts, chars), block) for parts, chars, block in entries]
