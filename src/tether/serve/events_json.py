"""A run's events as plain JSON, for a page or any client that is not tether: ``{"kind": ..., ...}`` per event.

Each event is what ``msgspec`` makes of it (its fields, its ``kind`` tag), with what must not leave the server
taken out or masked the way telemetry shows a run (``tether.redaction``): tool calls' arguments redacted
(secret-named values hidden, known keys, bearer tokens and URL passwords masked), the texts a run writes masked,
an exception replaced by its code and its (masked) message, an attachment by its media type, name and size (never
its bytes), and a finished run (``run_completed``) by :func:`result_summary`, the result without its transcript.
A sub-agent's event (``sub_agent_event``) carries its event in the same form.

Pure functions of an event: no I/O, nothing kept between calls. Pass the agent's ``Redaction`` (its masker knows
the agent's own keys); without one the default rules apply.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from tether.errors import TetherError
from tether.events import (
    Compacted,
    RunCompleted,
    RunEvent,
    RunResult,
    SubAgentEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
)
from tether.messages import Attachment, Message, Text, Thinking, ToolCall, ToolResult
from tether.paused import PendingCall
from tether.redaction import Redaction, default_redaction
from tether.serve.masking import HeldText

__all__ = ["Stream", "encode", "error_summary", "pending_json", "plain", "result_summary", "sse", "to_jsonable"]


def to_jsonable(event: RunEvent, redaction: Redaction | None = None) -> dict[str, Any]:
    """``event`` as a JSON-ready dict (``{"kind": ..., ...}``), masked (see the module's docstring)."""
    shown = redaction if redaction is not None else default_redaction()
    if isinstance(event, TextDelta | ThinkingDelta):
        return {"kind": event.kind, "text": shown.text(event.text)}
    if isinstance(event, ToolCallStarted):
        return {"kind": event.kind, "call": _call(event.call, shown), "turn": event.turn}
    if isinstance(event, ToolResultReceived):
        return {"kind": event.kind, "result": _result(event.result, shown), "turn": event.turn}
    if isinstance(event, RunCompleted):
        return {"kind": event.kind, "result": result_summary(event.result, shown)}
    if isinstance(event, SubAgentEvent):
        inner = to_jsonable(event.event, shown)
        return {"kind": event.kind, "path": list(event.path), "call_ids": list(event.call_ids), "event": inner}
    data: dict[str, Any] = plain(event)
    if isinstance(event, TurnCompleted):
        data["message"] = _message(event.message, shown)
    elif isinstance(event, Compacted):
        data["marker"] = _message(event.marker, shown)
    return data


class Stream:
    """One run's events as JSON, in order, its streamed text masked across deltas (``tether.serve.masking``):
    a delta whose end could begin a known key is sent shorter, the rest coming with the next delta, or as a delta
    of its own just before the next event of another kind. Use it for a stream; :func:`to_jsonable` for one event."""

    __slots__ = ("_held", "_held_kind", "redaction")

    def __init__(self, redaction: Redaction | None = None) -> None:
        self.redaction = redaction if redaction is not None else default_redaction()
        self._held = HeldText(self.redaction)
        self._held_kind = ""

    def events(self, event: RunEvent) -> list[dict[str, Any]]:
        """What of ``event`` can be sent now (as :func:`to_jsonable` makes it): none, one, or two events."""
        out: list[dict[str, Any]] = []
        if isinstance(event, TextDelta | ThinkingDelta):
            if event.kind != self._held_kind:
                self._flush(out)
                self._held_kind = event.kind
            piece = self._held.push(event.text)
            if piece:
                out.append({"kind": event.kind, "text": piece})
            return out
        self._flush(out)
        out.append(to_jsonable(event, self.redaction))
        return out

    def _flush(self, out: list[dict[str, Any]]) -> None:
        rest = self._held.flush()
        if rest:
            out.append({"kind": self._held_kind, "text": rest})
        self._held_kind = ""


def encode(event: RunEvent, redaction: Redaction | None = None) -> bytes:
    """``event`` as JSON bytes (:func:`to_jsonable`)."""
    return msgspec.json.encode(to_jsonable(event, redaction))


def sse(event: RunEvent | dict[str, Any], redaction: Redaction | None = None) -> str:
    """``event`` (a run's event, or one :class:`Stream` made) as one server-sent event: ``event: <kind>`` and
    ``data: <json>`` (JSON has no newline)."""
    data = event if isinstance(event, dict) else to_jsonable(event, redaction)
    return f"event: {data['kind']}\ndata: {msgspec.json.encode(data).decode()}\n\n"


def result_summary(result: RunResult[Any], redaction: Redaction | None = None) -> dict[str, Any]:
    """What a finished run is, without its transcript: why it stopped, its answer and output, its usage and cost,
    and each provider call's record (durations, tokens, tool calls and their errors, compactions)."""
    shown = redaction if redaction is not None else default_redaction()
    cost = result.cost
    return {
        "run_id": result.run_id,
        "stop_reason": result.stop_reason,
        "degraded": result.degraded,
        "detail": shown.text(result.detail),
        "error": None if result.error is None else error_summary(result.error, shown),
        "text": shown.text(result.text),
        "output": shown.value(plain(result.output)),
        "usage": plain(result.usage),
        "cost": None if cost is None else {**plain(cost), "total_usd": cost.total_usd},
        "turns": result.turns,
        "duration_ms": result.duration_ms,
        "finish_reason": result.finish_reason,
        "last_agent": result.last_agent,
        "turn_records": shown.value(plain(result.turn_records)),
        "pending": pending_json(result.pending, shown),
    }


def pending_json(pending: Iterable[PendingCall], redaction: Redaction) -> list[dict[str, Any]]:
    """A paused run's pending calls as JSON: arguments redacted and masked like a tool call's; the digest (of the
    real arguments) an approval may carry back."""
    return [
        {
            "id": call.id,
            "tool": call.tool,
            "arguments": redaction.arguments(call.arguments) or {},
            "reason": redaction.text(call.reason),
            "kind": call.kind,
            "digest": call.digest,
        }
        for call in pending
    ]


def error_summary(error: BaseException, redaction: Redaction | None = None) -> dict[str, str]:
    """An exception as ``{"code", "message"}``: a tether error's stable code, else ``error``; its message masked."""
    shown = redaction if redaction is not None else default_redaction()
    if isinstance(error, TetherError):
        return {"code": error.code, "message": shown.text(error.message)}
    return {"code": "error", "message": shown.text(f"{type(error).__name__}: {error}")}


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data: msgspec's builtins, a pydantic model's JSON form, an exception's summary;
    anything else as its text."""
    return msgspec.to_builtins(value, enc_hook=_unknown)


def _unknown(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a pydantic model (a typed output)
        return dump(mode="json")
    if isinstance(value, BaseException):
        return error_summary(value)
    return str(value)


def _call(call: ToolCall, shown: Redaction) -> dict[str, Any]:
    return {
        "id": call.id,
        "name": call.name,
        "arguments": shown.arguments(call.arguments),
        "raw_arguments": None if call.raw_arguments is None else shown.text(call.raw_arguments),
    }


def _result(result: ToolResult, shown: Redaction) -> dict[str, Any]:
    return {
        "call_id": result.call_id,
        "name": result.name,
        "content": shown.text(result.content),
        "is_error": result.is_error,
        "code": result.code,
        "attachments": [_attachment(a) for a in result.attachments],
    }


def _attachment(attachment: Attachment) -> dict[str, Any]:
    kept = attachment.media_type, attachment.name, attachment.size, attachment.url
    return dict(zip(("media_type", "name", "size", "url"), kept, strict=True))


def _message(message: Message, shown: Redaction) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        kind = type(part)
        if kind is Text or kind is Thinking:
            parts.append({"kind": part.kind, "text": shown.text(part.text)})  # type: ignore[union-attr]
        elif kind is ToolCall:
            parts.append({"kind": "tool_call", **_call(part, shown)})  # type: ignore[arg-type]
        elif kind is ToolResult:
            parts.append({"kind": "tool_result", **_result(part, shown)})  # type: ignore[arg-type]
        else:
            parts.append({"kind": "attachment", **_attachment(part)})  # type: ignore[arg-type]
    return {"role": message.role, "parts": parts}
