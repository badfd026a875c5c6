"""The AI SDK's UI message stream (``useChat``, stream protocol ``v1``): a ``useChat`` request as a run's input,
a run's events as UI message chunks, each a server-sent event ``data: {json}``, the stream ended by
``data: [DONE]``; the response carries :data:`HEADERS` (``x-vercel-ai-ui-message-stream: v1``).

In: :func:`chat_input` reads the request body (``{id, messages, trigger, messageId, ...}``, each message a
``UIMessage`` with ``parts``): a user's ``text`` and ``file`` parts (a data URL's bytes, or an ``http(s)`` URL by
reference) become the prompt and history; an assistant's text and its tool parts (``tool-NAME`` and
``dynamic-tool``) become its calls and, where they have one, their results (``output-available``;
``output-error`` and ``output-denied`` as error results), split into one assistant message and one tool message
per step as the model made them; a call with no output yet is left out (nothing answers it). System messages'
text is the run's instructions; reasoning, source, ``step-start`` and ``data-*`` parts are the page's, not the
model's.

Out: a :class:`Translator` per run turns each ``RunEvent`` into chunks: ``start`` (the message id) first; a
provider call is a step (``start-step`` ... ``finish-step``, around its tool calls); thinking is ``reasoning-start``/
``-delta``/``-end``; text ``text-start``/``-delta``/``-end``; a tool call ``tool-input-start``, ``tool-input-delta``
(its arguments' JSON) and ``tool-input-available`` when it starts, ``tool-output-available`` (the result's text) or
``tool-output-error`` when it ends; a typed output ``data-output`` (one part, id ``output``: as it is written,
then as it is); what the stream has no chunk for is a transient ``data-<kind>`` part (not kept in the message,
read with ``useChat``'s ``onData``): each call's usage (``data-usage``), retries, rate-limit waits, fallbacks,
failed calls, compactions, handoffs, and a sub-agent's events (``data-sub-agent-event``, its path and its event
as ``tether.serve.events_json`` writes it). Last: ``error`` (its ``errorText``: ``[code] message``) for a run that
failed, ``abort`` for a cancelled one, then ``finish`` with the message's metadata (run id, model, stop reason,
degraded, detail, usage, cost), then ``[DONE]``.

Only the fields of the protocol's first version (AI SDK 5) are written, which later versions read too: its
chunks are strict objects, and a field a client does not know fails its stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from secrets import token_hex
from typing import Any

import msgspec

from tether.errors import RequestInvalid
from tether.events import (
    PartialOutput,
    RunCompleted,
    RunEvent,
    RunResult,
    RunStarted,
    SubAgentEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingEnded,
    ThinkingStarted,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
    TurnStarted,
)
from tether.messages import Attachment, Message, Text, ToolCall, ToolResult
from tether.redaction import Redaction, default_redaction
from tether.serve import events_json
from tether.serve.inputs import attachment_from_url, conversation, tool_call, tool_result
from tether.serve.masking import HeldText

__all__ = ["DONE", "HEADERS", "ChatRequest", "Part", "Translator", "chat_input", "encode_part"]

HEADERS: dict[str, str] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The response headers of a UI message stream: the protocol's own, and no caching or buffering on the way."""

DONE = "data: [DONE]\n\n"
"""The stream's last line, after the ``finish`` chunk."""

Part = dict[str, Any]
"""One UI message chunk: ``{"type": ..., ...}``, JSON-ready."""


def encode_part(part: Part) -> str:
    """``part`` as one server-sent event: ``data: {json}``."""
    return f"data: {msgspec.json.encode(part).decode()}\n\n"


# --- in --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A ``useChat`` request read for a run: ``agent.stream(chat.prompt, history=chat.history,
    instructions=chat.instructions)``. ``chat_id`` is the chat's ``id``; ``trigger`` (``submit-message``,
    ``regenerate-message``) and ``message_id`` are as sent; ``extra`` holds the body's other fields (what the page
    added with ``useChat``'s ``body`` option)."""

    chat_id: str | None
    prompt: list[str | Attachment] | None
    history: tuple[Message, ...]
    instructions: str | None
    trigger: str | None = None
    message_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    continues: str | None = None
    """The id of the assistant message this answer goes on with: the last one, when the conversation ends with
    the output of a tool the page ran (``useChat`` adds the answer's parts to it: give it to the
    :class:`Translator` as its ``message_id``); ``None`` when the answer is a new message."""


def chat_input(body: bytes | str) -> ChatRequest:
    """A ``useChat`` request body read for a run; ``RequestInvalid`` when it is not one, or holds a conversation
    tether cannot run."""
    try:
        request = json.loads(body)
    except ValueError as error:
        raise RequestInvalid(f"the request body is not JSON: {error}") from None
    if not isinstance(request, dict):
        raise RequestInvalid("the request body must be a JSON object with `messages`")
    messages = request.get("messages")
    if not isinstance(messages, list):
        raise RequestInvalid("the request has no `messages` list (a useChat body: {id, messages, trigger})")
    system: list[str] = []
    converted: list[Message] = []
    for index, message in enumerate(messages):
        converted += _message(message, f"messages.{index}", system)
    asked = conversation(converted, system)
    extra = {k: v for k, v in request.items() if k not in ("id", "messages", "trigger", "messageId")}
    return ChatRequest(
        chat_id=_optional_str(request, "id", "id"),
        prompt=asked.prompt,
        history=asked.history,
        instructions=asked.instructions,
        trigger=_optional_str(request, "trigger", "trigger"),
        message_id=_optional_str(request, "messageId", "messageId"),
        extra=extra,
        continues=_last_assistant(messages) if asked.prompt is None else None,
    )


def _last_assistant(messages: list[Any]) -> str | None:
    found = messages[-1].get("id") if messages and messages[-1].get("role") == "assistant" else None
    return found if isinstance(found, str) else None


def _message(message: Any, where: str, system: list[str]) -> list[Message]:
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        raise RequestInvalid(f"{where}: a UI message is an object with `role` and a `parts` list")
    role = message.get("role")
    parts = message["parts"]
    for index, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise RequestInvalid(f"{where}.parts.{index}: a part is an object with a `type`")
    if role == "system":
        system.append("".join(_text(p, where) for p in parts if p["type"] == "text"))
        return []
    if role == "user":
        return [Message("user", tuple(_user_parts(parts, where)))]
    if role == "assistant":
        return _assistant(parts, where)
    raise RequestInvalid(f"{where}.role: {role!r} is not a UI message's role (system, user, assistant)")


def _user_parts(parts: list[dict[str, Any]], where: str) -> list[Text | Attachment]:
    found: list[Text | Attachment] = []
    for index, part in enumerate(parts):
        if part["type"] == "text":
            found.append(Text(_text(part, where)))
        elif part["type"] == "file":
            url, media_type = part.get("url"), part.get("mediaType")
            if not isinstance(url, str) or not isinstance(media_type, str):
                raise RequestInvalid(f"{where}.parts.{index}: a file part has a `url` and a `mediaType`")
            name = part.get("filename")
            found.append(attachment_from_url(url, media_type, name if isinstance(name, str) else None))
    return found


def _assistant(parts: list[dict[str, Any]], where: str) -> list[Message]:
    """An assistant's UI message as the steps the model made: each step's text and calls, then its results."""
    messages: list[Message] = []
    said: list[Text | ToolCall] = []
    results: list[ToolResult] = []
    for index, part in enumerate(parts):
        kind = part["type"]
        if kind == "text" or kind == "step-start":
            if results:  # a step ended with its results: what follows is the next step
                messages += [Message("assistant", tuple(said)), Message("tool", tuple(results))]
                said, results = [], []
            if kind == "text" and part.get("text"):
                said.append(Text(_text(part, where)))
        elif kind == "dynamic-tool" or kind.startswith("tool-"):
            name = part.get("toolName") if kind == "dynamic-tool" else kind[5:]
            call_id = part.get("toolCallId")
            if not isinstance(name, str) or not name or not isinstance(call_id, str):
                raise RequestInvalid(f"{where}.parts.{index}: a tool part has a `toolCallId` and a tool name")
            result = _tool_part(part, call_id, name)
            if result is not None:
                said.append(result[0])
                results.append(result[1])
    if said or results:
        messages.append(Message("assistant", tuple(said)))
    if results:
        messages.append(Message("tool", tuple(results)))
    return messages


def _tool_part(part: dict[str, Any], call_id: str, name: str) -> tuple[ToolCall, ToolResult] | None:
    state = part.get("state")
    call = tool_call(call_id, name, part.get("input"))
    if state == "output-available":
        output = part.get("output")
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return call, tool_result(call, text)
    if state == "output-error":
        return call, tool_result(call, str(part.get("errorText") or "The tool failed."), error=True)
    if state == "output-denied":
        return call, tool_result(call, "The user denied this tool call.", error=True)
    return None  # no output yet: nothing answers it, so the model is not shown it


def _text(part: dict[str, Any], where: str) -> str:
    text = part.get("text")
    if not isinstance(text, str):
        raise RequestInvalid(f"{where}: a text part has a `text` string")
    return text


def _optional_str(request: dict[str, Any], key: str, name: str) -> str | None:
    value = request.get(key)
    if value is not None and not isinstance(value, str):
        raise RequestInvalid(f"`{name}` must be a string")
    return value


# --- out -------------------------------------------------------------------------------------------------------


class Translator:
    """One run's events as UI message chunks (see the module's docstring for the mapping and its order).

    Stateful: feed it every event of the run, in order (``events``); the run's ``RunCompleted`` ends the message
    with ``finish`` (after ``error`` or ``abort`` when the run failed or was cancelled): write :data:`DONE` after
    it. A run that ended without one (an exception) is ended with :meth:`fail`."""

    def __init__(self, message_id: str | None = None, *, redaction: Redaction | None = None) -> None:
        self.message_id = message_id or f"msg-{token_hex(12)}"
        self.redaction = redaction if redaction is not None else default_redaction()
        self.finished = False
        self._started = False
        self._step = False
        self._text: str | None = None
        self._reasoning: str | None = None
        self._held: HeldText | None = None
        """The open text's or reasoning's masking: what of it is held back (one is open at a time)."""
        self._announced: set[str] = set()
        self._ids = 0
        self._meta: dict[str, Any] = {}

    def events(self, event: RunEvent) -> list[Part]:
        """The chunks ``event`` stands for (none for some)."""
        if self.finished:
            return []
        out: list[Part] = []
        if not self._started:
            self._started = True
            if type(event) is RunStarted:
                self._meta = {"runId": event.run_id, "model": event.model}
            out.append({"type": "start", "messageId": self.message_id, "messageMetadata": dict(self._meta)})
            if type(event) is RunStarted:
                return out
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event, out)
        else:
            self._data(event, out)
        return out

    def finish(self, result: RunResult[Any]) -> list[Part]:
        """The chunks that end the message of a run that ended with ``result`` (as its ``RunCompleted`` does)."""
        return self.events(RunCompleted(result))

    def fail(self, error: BaseException) -> list[Part]:
        """The chunks that end the message of a run that failed without a result: ``error``, then ``finish``."""
        if self.finished:
            return []
        out: list[Part] = []
        if not self._started:
            self._started = True
            out.append({"type": "start", "messageId": self.message_id})
        self._close_step(out)
        shown = events_json.error_summary(error, self.redaction)
        out.append({"type": "error", "errorText": f"[{shown['code']}] {shown['message']}"})
        out.append({"type": "finish", "messageMetadata": {**self._meta, "error": shown}})
        self.finished = True
        return out

    def _new_id(self, what: str) -> str:
        self._ids += 1
        return f"{what}-{self._ids}"

    def _data(self, event: RunEvent, out: list[Part]) -> None:
        value = events_json.to_jsonable(event, self.redaction)
        del value["kind"]
        out.append({"type": f"data-{event.kind.replace('_', '-')}", "data": value, "transient": True})

    def _turn_started(self, event: TurnStarted, out: list[Part]) -> None:
        self._close_step(out)
        self._step = True
        out.append({"type": "start-step"})

    def _thinking_started(self, event: ThinkingStarted, out: list[Part]) -> None:
        self._close_text(out)
        self._close_reasoning(out)
        self._reasoning = self._new_id("reasoning")
        self._held = HeldText(self.redaction)
        out.append({"type": "reasoning-start", "id": self._reasoning})

    def _thinking_delta(self, event: ThinkingDelta, out: list[Part]) -> None:
        if not event.text:
            return
        if self._reasoning is None:
            self._thinking_started(ThinkingStarted(), out)
        assert self._held is not None
        delta = self._held.push(event.text)
        if delta:
            out.append({"type": "reasoning-delta", "id": self._reasoning, "delta": delta})

    def _thinking_ended(self, event: ThinkingEnded, out: list[Part]) -> None:
        self._close_reasoning(out)

    def _text_delta(self, event: TextDelta, out: list[Part]) -> None:
        if not event.text:
            return
        if self._text is None:
            self._close_reasoning(out)
            self._text = self._new_id("text")
            self._held = HeldText(self.redaction)
            out.append({"type": "text-start", "id": self._text})
        assert self._held is not None
        delta = self._held.push(event.text)
        if delta:
            out.append({"type": "text-delta", "id": self._text, "delta": delta})

    def _partial_output(self, event: PartialOutput, out: list[Part]) -> None:
        data = self.redaction.value(events_json.plain(event.data))
        out.append({"type": "data-output", "id": "output", "data": data})

    def _turn_completed(self, event: TurnCompleted, out: list[Part]) -> None:
        self._close_text(out)
        self._close_reasoning(out)
        value = {
            "turn": event.turn,
            "usage": events_json.plain(event.usage),
            "finishReason": event.finish_reason,
            "status": event.status,
            "rejected": event.rejected,
            "cached": event.cached,
        }
        out.append({"type": "data-usage", "data": value, "transient": True})

    def _tool_started(self, event: ToolCallStarted, out: list[Part]) -> None:
        if event.call.id not in self._announced:  # a resumed run's decided call was announced by the paused run
            self._announce(event.call, out)

    def answering(self, call_ids: Iterable[str]) -> None:
        """A resumed run's stream: the calls it settles are in the page's message already (the paused run's
        stream gave their input), so they get their output only."""
        self._announced.update(call_ids)

    def _announce(self, call: ToolCall, out: list[Part]) -> None:
        self._close_text(out)
        self._close_reasoning(out)
        self._announced.add(call.id)
        arguments = self.redaction.arguments(call.arguments)
        if arguments is not None:
            text = json.dumps(arguments, ensure_ascii=False)
            given: Any = arguments
        else:
            text = self.redaction.text(call.raw_arguments or "")
            given = text
        out.append({"type": "tool-input-start", "toolCallId": call.id, "toolName": call.name})
        if text:
            out.append({"type": "tool-input-delta", "toolCallId": call.id, "inputTextDelta": text})
        out.append({"type": "tool-input-available", "toolCallId": call.id, "toolName": call.name, "input": given})

    def _tool_result(self, event: ToolResultReceived, out: list[Part]) -> None:
        result = event.result
        if result.call_id not in self._announced:
            self._announce(ToolCall(result.call_id, result.name, {}), out)
        content = self.redaction.text(result.content)
        if result.is_error:
            out.append({"type": "tool-output-error", "toolCallId": result.call_id, "errorText": content})
        else:
            out.append({"type": "tool-output-available", "toolCallId": result.call_id, "output": content})

    def _sub_agent(self, event: SubAgentEvent, out: list[Part]) -> None:
        value = events_json.to_jsonable(event, self.redaction)
        del value["kind"]
        out.append({"type": "data-sub-agent-event", "data": value, "transient": True})

    def _close_text(self, out: list[Part]) -> None:
        if self._text is not None:
            rest = self._held.flush() if self._held is not None else ""
            if rest:
                out.append({"type": "text-delta", "id": self._text, "delta": rest})
            out.append({"type": "text-end", "id": self._text})
            self._text = self._held = None

    def _close_reasoning(self, out: list[Part]) -> None:
        if self._reasoning is not None:
            rest = self._held.flush() if self._held is not None else ""
            if rest:
                out.append({"type": "reasoning-delta", "id": self._reasoning, "delta": rest})
            out.append({"type": "reasoning-end", "id": self._reasoning})
            self._reasoning = self._held = None

    def _close_step(self, out: list[Part]) -> None:
        self._close_text(out)
        self._close_reasoning(out)
        if self._step:
            out.append({"type": "finish-step"})
            self._step = False

    def _finish(self, event: RunCompleted, out: list[Part]) -> None:
        result = event.result
        for call in result.pending:  # a paused run's waiting calls, in their step: their input, no output
            if call.id not in self._announced:
                self._announce(ToolCall(call.id, call.tool, call.arguments), out)
        self._close_step(out)
        if result.output is not None and not isinstance(result.output, str):
            data = self.redaction.value(events_json.plain(result.output))
            out.append({"type": "data-output", "id": "output", "data": data})
        summary = events_json.result_summary(result, self.redaction)
        if result.stop_reason == "cancelled":
            out.append({"type": "abort"})
        elif result.error is not None:
            error = summary["error"]
            out.append({"type": "error", "errorText": f"[{error['code']}] {error['message']}"})
        keep = ("stop_reason", "degraded", "detail", "error", "usage", "cost", "turns", "duration_ms", "last_agent")
        meta = {**self._meta, **{_camel(k): summary[k] for k in keep}}
        if result.pending:
            meta["pending"] = summary["pending"]
        out.append({"type": "finish", "messageMetadata": meta})
        self.finished = True


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


_Handler = Callable[[Translator, Any, list[Part]], None]
_HANDLERS: dict[type, _Handler] = {
    TurnStarted: Translator._turn_started,
    ThinkingStarted: Translator._thinking_started,
    ThinkingDelta: Translator._thinking_delta,
    ThinkingEnded: Translator._thinking_ended,
    TextDelta: Translator._text_delta,
    PartialOutput: Translator._partial_output,
    TurnCompleted: Translator._turn_completed,
    ToolCallStarted: Translator._tool_started,
    ToolResultReceived: Translator._tool_result,
    SubAgentEvent: Translator._sub_agent,
    RunCompleted: Translator._finish,
}
"""The events with a chunk of their own; every other kind is a transient ``data-<kind>`` part."""
