"""A client's conversation as a run's input: the prompt, the history before it, and the instructions.

AG-UI and the AI SDK's ``useChat`` both send the whole conversation with every request; each protocol's module
reads its own shapes into tether messages and hands them here. What comes back is what ``agent.stream`` takes:
the last user message's parts as the ``prompt`` (``None`` when the conversation ends with tool results, which the
model reads next), the messages before it as ``history``, and the system messages' text as ``instructions``.

The conversation must be one tether can run: a valid transcript (every tool call answered once, by a result that
follows it) ending where the model speaks next. Assistant messages before the first user message (a page's
greeting) are moved to the instructions, their text kept: a model's conversation starts with its user. Anything
else, and any attachment no model reads (a video, a malformed data URL), is a :class:`~tether.errors.RequestInvalid`
naming the problem, never a run that fails later.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigInvalid, RequestInvalid
from tether.messages import Attachment, JsonObject, Message, Text, ToolCall, ToolResult, transcript_problems

__all__ = [
    "Conversation",
    "arguments_of",
    "attachment_from_data",
    "attachment_from_url",
    "conversation",
    "merge_tools",
    "tool_call",
    "tool_result",
]


@dataclass(frozen=True, slots=True)
class Conversation:
    """What a run is asked: ``prompt`` (strings and attachments; ``None`` to run ``history`` as it is),
    ``history`` (the messages before it) and ``instructions`` (the client's system text, ``None`` without)."""

    prompt: list[str | Attachment] | None
    history: tuple[Message, ...]
    instructions: str | None


def conversation(messages: Sequence[Message], system: Sequence[str] = ()) -> Conversation:
    """``messages`` (no system message among them) split into a run's input; ``RequestInvalid`` when they are
    not a conversation tether can run."""
    merged = merge_tools(messages)
    opening: list[str] = []
    while merged and merged[0].role == "assistant" and not merged[0].tool_calls:
        opening.append(merged.pop(0).text)  # a page's greeting: a model's conversation starts with its user
    if not merged:
        raise RequestInvalid("the request has no message to answer: send at least one user message")
    problems = transcript_problems(merged)
    if problems:
        raise RequestInvalid(f"the conversation is not valid: {problems[0]}", details={"errors": problems})
    last = merged[-1]
    said = "\n\n".join(text for text in opening if text.strip())
    system = [*system, f"{OPENING}\n\n{said}"] if said else system
    instructions = "\n\n".join(text for text in system if text.strip()) or None
    if last.role == "tool":
        return Conversation(None, tuple(merged), instructions)
    if last.role != "user":
        raise RequestInvalid(
            f"the conversation ends with an {last.role} message: it must end with a user message or tool results"
        )
    prompt: list[str | Attachment] = []
    for part in last.parts:
        if type(part) is Text:
            prompt.append(part.text)
        elif type(part) is Attachment:
            prompt.append(part)
    if not prompt:
        raise RequestInvalid("the last user message is empty: give it text or a file")
    return Conversation(prompt, tuple(merged[:-1]), instructions)


OPENING = "The conversation opened with this message of yours, before the user's first:"
"""What the instructions say before the text of assistant messages that came before the first user message (a
page's greeting): no model takes a conversation that starts with its own message, and the text is kept."""


def merge_tools(messages: Sequence[Message]) -> list[Message]:
    """Consecutive tool messages as one (a client sends one per result; a model reads a turn's results
    together), and empty messages left out."""
    merged: list[Message] = []
    for message in messages:
        if not message.parts:
            continue
        if message.role == "tool" and merged and merged[-1].role == "tool":
            merged[-1] = Message("tool", merged[-1].parts + message.parts)
        else:
            merged.append(message)
    return merged


def tool_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A call as a client sends it back: its arguments an object, or JSON text (kept as the model wrote it)."""
    if isinstance(arguments, str):
        return ToolCall(call_id, name, arguments_of(arguments), arguments)
    if arguments is None:
        return ToolCall(call_id, name, {})
    if isinstance(arguments, dict):
        return ToolCall(call_id, name, arguments)
    return ToolCall(call_id, name, None, json.dumps(arguments))


def arguments_of(text: str) -> JsonObject | None:
    """A call's JSON arguments as an object; ``None`` when they are not one (the model's malformed call)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def tool_result(
    call: ToolCall, content: str, *, error: bool = False, attachments: tuple[Attachment, ...] = ()
) -> ToolResult:
    """The result a client sends for ``call`` (an error one with the code of a tool's failure)."""
    code = "tool_failed" if error else None
    return ToolResult(call.id, call.name, content, is_error=error, code=code, attachments=attachments)


def attachment_from_data(data: str, media_type: str, name: str | None = None) -> Attachment:
    """An attachment from base64 text; ``RequestInvalid`` for text that is not base64 or a kind no model reads."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestInvalid(f"the file {name or media_type!r} is not valid base64") from None
    return _attachment(lambda: Attachment.from_bytes(raw, media_type, name=name))


def attachment_from_url(url: str, media_type: str | None, name: str | None = None) -> Attachment:
    """An attachment from a ``data:`` URL (its bytes) or an ``http(s)://`` one (by reference)."""
    if url.startswith("data:"):
        header, comma, payload = url.partition(",")
        if not comma or not header.endswith(";base64"):
            raise RequestInvalid(f"the file {name or url[:40]!r} is not a base64 data URL (data:TYPE;base64,...)")
        return attachment_from_data(payload, media_type or header[5:-7], name)
    found = _attachment(lambda: Attachment.from_url(url, media_type))
    return found if name is None else Attachment(found.media_type, None, found.url, name)


def _attachment(make: Any) -> Attachment:
    try:
        made: Attachment = make()
    except ConfigInvalid as error:
        raise RequestInvalid(error.message) from None
    return made
