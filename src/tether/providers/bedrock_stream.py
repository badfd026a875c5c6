"""Bedrock's Converse answers, streamed (ConverseStream) or whole (Converse), read into tether's ``LlmEvent``s.

A streamed answer's event-stream messages reach the decoder as ``{"<event type>": <payload>}``
(``providers/http/eventstream.py``):

* ``messageStart``: ``StreamStart``.
* ``contentBlockStart`` with ``start.toolUse`` (``toolUseId``, ``name``): ``ToolCallStart`` (``index`` is the
  call's position among the turn's calls); ``contentBlockStop`` of that block: ``ToolCallEnd``.
* ``contentBlockDelta``: ``delta.text`` -> ``TextDelta``; ``delta.toolUse.input`` (a piece of the arguments'
  JSON) -> ``ToolCallDelta``; ``delta.reasoningContent.text`` -> ``ThinkingDelta``; its ``signature`` ->
  ``ThinkingDelta("", signature=...)`` marked ``{"origin": "bedrock"}``, which closes the thinking block; its
  ``redactedContent`` -> the same, marked ``"redacted": True`` (sent back as it came, ``bedrock_wire.py``).
* ``messageStop``: the stop reason. ``end_turn`` and ``stop_sequence`` -> ``stop``, ``tool_use`` ->
  ``tool_calls``, ``max_tokens`` and ``model_context_window_exceeded`` -> ``length`` (a cut answer the loop
  continues), ``guardrail_intervened`` and ``content_filtered`` -> ``content_filter``, anything else ->
  ``other``.
* ``metadata``: the usage, which comes after ``messageStop``: ``inputTokens`` (cache reads and writes
  excluded, as Bedrock counts them), ``outputTokens``, ``cacheReadInputTokens`` -> ``cache_read_tokens``,
  ``cacheWriteInputTokens`` -> ``cache_write_tokens``. ``StreamEnd`` is sent at the end of the stream, with it.
* An exception (``throttlingException``, ``modelStreamErrorException``, ``validationException``,
  ``serviceUnavailableException``, ``internalServerException``, ...) is raised as the ``ProviderError`` its name
  stands for: throttling -> ``rate_limited``, validation -> ``bad_request`` (``context_overflow`` when its
  message says the input is too long), the others -> ``provider_unavailable``.

A whole Converse answer (``{"output": {"message": {"content": [...]}}, "stopReason", "usage"}``) gives the
same events, each block as if it had streamed whole. Unknown events and block kinds are ignored; a known field
of the wrong JSON type is ``invalid_response``.
"""

from __future__ import annotations

import json
from typing import Any

from tether.errors import ProviderError
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
from tether.providers.bedrock_wire import ORIGIN
from tether.providers.decoding import parse_json_text, unfinished
from tether.providers.http.errors import classify
from tether.providers.wire import as_count, malformed
from tether.usage import Usage

__all__ = ["EXCEPTION_STATUS", "STOP_REASONS", "BedrockDecoder", "exception_error", "parse_usage"]

PROVIDER = "bedrock"
STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
EXCEPTION_STATUS = {
    "throttlingexception": 429,
    "validationexception": 400,
    "accessdeniedexception": 403,
    "resourcenotfoundexception": 404,
    "modelstreamerrorexception": 500,
    "modeltimeoutexception": 408,
    "internalserverexception": 500,
    "serviceunavailableexception": 503,
}
"""The HTTP status each of Bedrock's exceptions is sent with, which says what kind of error it is."""


def exception_error(name: str, payload: Any) -> ProviderError:
    """The ``ProviderError`` for an exception Bedrock sent inside a stream (``name``: its ``:exception-type``)."""
    message = payload.get("message") or payload.get("Message") if isinstance(payload, dict) else None
    text = str(message or name)[:1000]
    kind, details = classify(EXCEPTION_STATUS.get(name.lower(), 500), frozenset({name.lower()}), text)
    return kind(
        f"{PROVIDER} reported an error in the stream: {name}: {text}",
        provider_message=text,
        details={"provider_code": name} | details,
    )


def parse_usage(usage: Any) -> Usage:
    """Bedrock's ``usage`` object as tether's usage (see the module docstring)."""
    if usage is None:
        return Usage()
    if not isinstance(usage, dict):
        raise malformed(PROVIDER, "usage", usage)
    return Usage(
        input_tokens=as_count(usage.get("inputTokens")),
        output_tokens=as_count(usage.get("outputTokens")),
        cache_read_tokens=as_count(usage.get("cacheReadInputTokens")),
        cache_write_tokens=as_count(usage.get("cacheWriteInputTokens")),
    )


class BedrockDecoder:
    """One Converse answer's JSON to ``LlmEvent``s (``providers/decoding.py``'s protocol)."""

    __slots__ = ("_calls", "_finish", "_open", "_started", "_usage")

    def __init__(self) -> None:
        self._started = False
        self._calls = 0
        self._open: dict[int, str] = {}
        """The open tool-use blocks: content block index -> call id."""
        self._finish: FinishReason | None = None
        self._usage = Usage()

    def feed_json(self, text: str | bytes) -> list[LlmEvent]:
        return self.feed(parse_json_text(text, PROVIDER))

    def whole_json(self, body: str | bytes) -> list[LlmEvent]:
        return self.whole(parse_json_text(body, PROVIDER, "an answer"))

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one event-stream message (or of a whole answer, when that is what came)."""
        if not isinstance(data, dict):
            raise malformed(PROVIDER, "the event", data)
        if "output" in data or "stopReason" in data:  # a whole answer where a stream was asked for
            return self._whole_events(data)
        out: list[LlmEvent] = []
        for name, payload in data.items():
            if name.lower().endswith("exception") or name == "error":
                raise exception_error(name if name != "error" else str(payload.get("code", "error")), payload)
            if not isinstance(payload, dict):
                raise malformed(PROVIDER, name, payload)
            out += self._event(name, payload)
        return out

    def end(self) -> list[LlmEvent]:
        if self._finish is None:
            raise unfinished(PROVIDER, started=self._started)
        out: list[LlmEvent] = []
        if self._finish != "length":
            out += [ToolCallEnd(call) for call in self._open.values()]
        self._open.clear()
        out.append(StreamEnd(self._finish, self._usage))
        return out

    def whole(self, data: Any) -> list[LlmEvent]:
        if not isinstance(data, dict):
            raise malformed(PROVIDER, "the answer", data)
        out = self._whole_events(data)
        if self._finish is None:
            raise unfinished(PROVIDER, started=True, whole=True, missing="stopReason")
        return out + self.end()

    # --- the events -------------------------------------------------------------------------------------

    def _event(self, name: str, payload: dict[str, Any]) -> list[LlmEvent]:
        if name == "messageStart":
            return self._start()
        if name == "contentBlockStart":
            start = payload.get("start")
            tool = start.get("toolUse") if isinstance(start, dict) else None
            if tool is None:
                return self._start()
            return self._start() + self._call_start(_index(payload), tool)
        if name == "contentBlockDelta":
            delta = payload.get("delta")
            if not isinstance(delta, dict):
                raise malformed(PROVIDER, "contentBlockDelta.delta", delta)
            return self._start() + self._delta(_index(payload), delta)
        if name == "contentBlockStop":
            call = self._open.pop(_index(payload), None)
            return [ToolCallEnd(call)] if call is not None else []
        if name == "messageStop":
            self._finish = _finish(payload.get("stopReason"))
            return self._start()
        if name == "metadata":
            self._usage = parse_usage(payload.get("usage"))
        return []

    def _start(self) -> list[LlmEvent]:
        if self._started:
            return []
        self._started = True
        return [StreamStart()]

    def _call_start(self, index: int, tool: Any) -> list[LlmEvent]:
        if (
            not isinstance(tool, dict)
            or not isinstance(tool.get("toolUseId"), str)
            or not isinstance(tool.get("name"), str)
        ):
            raise malformed(PROVIDER, "contentBlockStart.start.toolUse", tool)
        call = ToolCallStart(tool["toolUseId"], tool["name"], self._calls)
        self._calls += 1
        self._open[index] = call.id
        return [call]

    def _delta(self, index: int, delta: dict[str, Any]) -> list[LlmEvent]:
        if "text" in delta:
            text = delta["text"]
            if not isinstance(text, str):
                raise malformed(PROVIDER, "delta.text", text)
            return [TextDelta(text)] if text else []
        if "toolUse" in delta:
            call = self._open.get(index)
            piece = delta["toolUse"].get("input") if isinstance(delta["toolUse"], dict) else None
            if call is None or not isinstance(piece, str):
                raise malformed(PROVIDER, "delta.toolUse", delta["toolUse"])
            return [ToolCallDelta(call, piece)] if piece else []
        if "reasoningContent" in delta:
            return _reasoning(delta["reasoningContent"])
        return []

    def _whole_events(self, data: dict[str, Any]) -> list[LlmEvent]:
        """A whole answer's blocks, each as if it had streamed whole; its stop reason and usage kept."""
        out = self._start()
        output = data.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            raise malformed(PROVIDER, "output.message.content", content)
        for index, block in enumerate(content):
            if not isinstance(block, dict):
                raise malformed(PROVIDER, f"output.message.content[{index}]", block)
            if "toolUse" in block:
                tool = block["toolUse"]
                out += self._call_start(index, tool)
                out.append(ToolCallDelta(tool["toolUseId"], json.dumps(tool.get("input") or {})))
                out.append(ToolCallEnd(self._open.pop(index)))
            elif "text" in block:
                out += self._delta(index, {"text": block["text"]})
            elif "reasoningContent" in block:
                out += _whole_reasoning(block["reasoningContent"])
        if "stopReason" in data:
            self._finish = _finish(data.get("stopReason"))
        self._usage = parse_usage(data.get("usage"))
        return out


def _index(payload: dict[str, Any]) -> int:
    index = payload.get("contentBlockIndex", 0)
    if type(index) is not int:
        raise malformed(PROVIDER, "contentBlockIndex", index)
    return index


def _finish(reason: Any) -> FinishReason:
    if not isinstance(reason, str):
        raise malformed(PROVIDER, "stopReason", reason)
    return STOP_REASONS.get(reason, "other")


_MARKED = {"origin": ORIGIN}


def _reasoning(reasoning: Any) -> list[LlmEvent]:
    """A ``reasoningContent`` delta: a piece of text, the block's signature, or its redacted content."""
    if not isinstance(reasoning, dict):
        raise malformed(PROVIDER, "delta.reasoningContent", reasoning)
    out: list[LlmEvent] = []
    text = reasoning.get("text")
    if isinstance(text, str) and text:
        out.append(ThinkingDelta(text))
    signature = reasoning.get("signature")
    if isinstance(signature, str) and signature:
        out.append(ThinkingDelta("", signature=signature, provider_data=dict(_MARKED)))
    redacted = reasoning.get("redactedContent")
    if isinstance(redacted, str) and redacted:
        out.append(ThinkingDelta("", signature=redacted, provider_data={**_MARKED, "redacted": True}))
    return out


def _whole_reasoning(reasoning: Any) -> list[LlmEvent]:
    """A whole answer's ``reasoningContent`` block: ``reasoningText`` (text and signature) or ``redactedContent``."""
    if not isinstance(reasoning, dict):
        raise malformed(PROVIDER, "reasoningContent", reasoning)
    text = reasoning.get("reasoningText")
    if isinstance(text, dict):
        return _reasoning({"text": text.get("text"), "signature": text.get("signature")})
    return _reasoning({"redactedContent": reasoning.get("redactedContent")})
