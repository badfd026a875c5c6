"""Anthropic Messages answers, streamed or whole, read into tether's ``LlmEvent``s.

One decoder reads a response's server-sent events (``message_start``, ``content_block_start`` / ``_delta`` /
``_stop``, ``message_delta``, ``message_stop``); a whole (non-streamed) message is first written as the events
that would have streamed it, so both paths give the same events. Per content block:

* ``text``: ``TextDelta``s (citations are not kept).
* ``tool_use``: ``ToolCallStart`` (``index`` is the call's position among the turn's calls), its
  ``input_json_delta`` pieces as ``ToolCallDelta``s, ``ToolCallEnd`` at ``content_block_stop``.
* ``thinking``: ``ThinkingDelta``s, then the ``signature_delta`` as ``ThinkingDelta("", signature=...)``
  marked ``{"origin": "anthropic"}``, which closes the block (``StreamAccumulator``).
* ``redacted_thinking``: one ``ThinkingDelta("", signature=<data>)`` marked ``{"origin": "anthropic",
  "redacted": True}``, so that it becomes a closed ``Thinking`` part and can be sent back as it came.
* any other block (``server_tool_use``, ``web_search_tool_result``, ``tool_search_tool_result``, ...): run by
  Anthropic, not by us, so never a tool call and never shown. The block is kept whole (its streamed input
  assembled) in ``StreamEnd.provider_data["server_blocks"]``, with its place among the turn's parts
  (:class:`Anchor`), so that the provider can send it back where it was on the next turn.

``ping`` and unknown events are ignored; an ``error`` event is raised as the ``ProviderError`` its type names
(``overloaded_error`` -> ``provider_unavailable``). Stop reasons: ``end_turn`` and ``stop_sequence`` ->
``stop``, ``tool_use`` -> ``tool_calls``, ``max_tokens`` and ``model_context_window_exceeded`` -> ``length``,
``refusal`` -> ``content_filter``, ``pause_turn`` (a server tool's loop paused; sending the turn back resumes
it) and anything new -> ``other``. Usage: ``input_tokens`` (cache reads and writes excluded, as Anthropic counts
them), ``output_tokens``, ``cache_read_input_tokens`` -> ``cache_read_tokens``, ``cache_creation_input_tokens``
-> ``cache_write_tokens``; the counts of ``message_delta`` (cumulative) replace those of ``message_start``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tether.errors import InvalidResponse, TransportError
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
from tether.providers.http import error_for_payload
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
    signed: bool = False


class EventDecoder:
    """Anthropic stream events (or one whole message) to ``LlmEvent``s, for one response."""

    __slots__ = ("_anchor", "_blocks", "_calls", "_finish", "_server_blocks", "_started", "_usage", "provider")

    def __init__(self, provider: str = ORIGIN) -> None:
        self.provider = provider
        self._started = False
        self._blocks: dict[int, _Block] = {}
        self._calls = 0
        self._anchor = Anchor(0, 0)
        self._server_blocks: list[dict[str, Any]] = []
        self._finish: FinishReason | None = None
        self._usage: dict[str, int] = {}

    def event(self, data: Any) -> list[LlmEvent]:
        """The events of one server-sent event's JSON data."""
        if not isinstance(data, dict):
            raise InvalidResponse(f"{self.provider} sent an event that is not a JSON object: {str(data)[:200]}")
        kind = data.get("type")
        if kind == "content_block_delta":
            return self._delta(data.get("index"), data.get("delta") or {})
        if kind == "content_block_start":
            return self._start(data.get("index"), data.get("content_block") or {})
        if kind == "content_block_stop":
            return self._stop(data.get("index"))
        if kind == "message_start":
            message = data.get("message") or {}
            self._read_usage(message.get("usage"))
            return self._start_stream(message)
        if kind == "message_delta":
            self._read_usage(data.get("usage"))
            if reason := (data.get("delta") or {}).get("stop_reason"):
                self._finish = STOP_REASONS.get(reason, "other")
            return []
        if kind == "error":
            raise error_for_payload(self.provider, data)
        if kind == "message":  # a whole answer where a stream was asked for
            return [event for item in as_stream_events(data) for event in self.event(item)]
        return []  # ping, message_stop, and event types added after this was written

    def message(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) message, ``StreamEnd`` included."""
        if not isinstance(data, dict):
            raise InvalidResponse(f"{self.provider} sent an answer that is not a JSON object: {str(data)[:200]}")
        if data.get("type") == "error":
            raise error_for_payload(self.provider, data)
        return self.event({**data, "type": "message"}) + self.end()

    def end(self) -> list[LlmEvent]:
        """Close the blocks left open and the turn; a stream that stopped without a stop reason is an error."""
        if self._finish is None:
            if not self._started:
                raise InvalidResponse(f"{self.provider} ended the stream without sending anything")
            raise TransportError(f"{self.provider} ended the stream before finishing its answer")
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
        )

    # --- events -------------------------------------------------------------------------------------------

    def _start_stream(self, message: dict[str, Any]) -> list[LlmEvent]:
        if self._started:
            return []
        self._started = True
        return [StreamStart(model=message.get("model"), response_id=message.get("id"))]

    def _read_usage(self, usage: Any) -> None:
        """``message_delta`` counts are cumulative: a field it carries replaces the one ``message_start`` sent."""
        if isinstance(usage, dict):
            for key, value in usage.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    self._usage[key] = value

    def _start(self, index: Any, block: dict[str, Any]) -> list[LlmEvent]:
        kind = str(block.get("type"))
        at = self._index(index)
        if at in self._blocks:
            raise InvalidResponse(f"{self.provider} started content block {at} twice")
        state = self._blocks[at] = _Block(kind, block)
        out: list[LlmEvent] = self._start_stream({}) if not self._started else []
        if kind == "text":
            out += self._text(block.get("text") or "")
        elif kind == "thinking":
            out += self._thinking(block.get("thinking") or "")
        elif kind == "tool_use":
            state.call_id = str(block.get("id") or f"toolu_{self._calls}")
            out.append(ToolCallStart(state.call_id, str(block.get("name") or ""), self._calls))
            self._calls += 1
            self._anchor = Anchor(self._anchor.parts + 1, self._anchor.chars)
        return out

    def _delta(self, index: Any, delta: dict[str, Any]) -> list[LlmEvent]:
        block = self._blocks.get(self._index(index))
        if block is None:
            raise InvalidResponse(f"{self.provider} continued content block {index} before starting it")
        kind = delta.get("type")
        if kind == "text_delta" and block.kind == "text":
            return self._text(delta.get("text") or "")
        if kind == "thinking_delta" and block.kind == "thinking":
            return self._thinking(delta.get("thinking") or "")
        if kind == "signature_delta" and block.kind == "thinking":
            block.signed = True
            return self._signature(str(delta.get("signature") or ""))
        if kind == "input_json_delta" and (piece := delta.get("partial_json")):
            block.pieces.append(piece)
            if block.call_id is not None:
                return [ToolCallDelta(block.call_id, piece)]
        return []  # citations, and delta types added after this was written

    def _stop(self, index: Any) -> list[LlmEvent]:
        block = self._blocks.pop(self._index(index), None)
        if block is None:
            raise InvalidResponse(f"{self.provider} stopped content block {index} before starting it")
        if block.call_id is not None:
            out: list[LlmEvent] = []
            if not block.pieces:  # a whole answer, or a call without arguments: its input came with its start
                out.append(ToolCallDelta(block.call_id, json.dumps(block.start.get("input") or {}, ensure_ascii=False)))
            return [*out, ToolCallEnd(block.call_id)]
        if block.kind == "thinking":
            signature = block.start.get("signature")
            return self._signature(signature) if signature and not block.signed else []
        if block.kind == "redacted_thinking":
            self._anchor = Anchor(self._anchor.parts + 1, self._anchor.chars)
            marked = {"origin": ORIGIN, "redacted": True}
            return [ThinkingDelta("", signature=str(block.start.get("data") or ""), provider_data=marked)]
        if block.kind not in CLIENT_BLOCKS:
            self._server_blocks.append({"anchor": [self._anchor.parts, self._anchor.chars], "block": _whole(block)})
        return []

    def _text(self, text: str) -> list[LlmEvent]:
        if not text:
            return []
        self._anchor = Anchor(self._anchor.parts, self._anchor.chars + len(text))
        return [TextDelta(text)]

    def _thinking(self, text: str) -> list[LlmEvent]:
        return [ThinkingDelta(text)] if text else []

    def _signature(self, signature: str) -> list[LlmEvent]:
        self._anchor = Anchor(self._anchor.parts + 1, self._anchor.chars)
        return [ThinkingDelta("", signature=signature, provider_data={"origin": ORIGIN})]

    def _index(self, index: Any) -> int:
        if not isinstance(index, int) or isinstance(index, bool):
            raise InvalidResponse(f"{self.provider} sent a content block event without an index")
        return index


def _whole(block: _Block) -> dict[str, Any]:
    """A server block as it is sent back: its start, with the input its deltas streamed."""
    whole = dict(block.start)
    if block.pieces:
        raw = "".join(block.pieces)
        try:
            whole["input"] = json.loads(raw)
        except ValueError:
            raise InvalidResponse(f"the input of a {block.kind} block is not JSON: {raw[:200]!r}") from None
    return whole


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
    """The server blocks kept on an assistant message of ours, with their places, in order."""
    if not provider_data or provider_data.get("origin") != ORIGIN:
        return []
    kept: list[tuple[Anchor, dict[str, Any]]] = []
    for entry in provider_data.get("server_blocks") or ():
        parts, chars = entry["anchor"]
        kept.append((Anchor(int(parts), int(chars)), dict(entry["block"])))
    return kept
