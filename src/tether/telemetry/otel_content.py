"""Message content in the GenAI conventions' JSON parts format, redacted: only used when content capture is on.

``gen_ai.input.messages`` is a list of ``{"role", "parts"}`` messages; ``gen_ai.output.messages`` adds a
``finish_reason`` to each; ``gen_ai.system_instructions`` is a list of parts. Parts are ``text``,
``reasoning``, ``tool_call`` (``id``, ``name``, ``arguments``) and ``tool_call_response`` (``id``,
``response``). Every text goes through :meth:`Redaction.text`, every tool call's arguments through
:meth:`Redaction.arguments`; the attributes are JSON strings (span attributes cannot hold structures).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tether.messages import Attachment, Message, Part, Text, Thinking, ToolCall, ToolResult

if TYPE_CHECKING:
    from tether.providers.base import ToolDefinition
    from tether.redaction import Redaction


_FINISH = {"tool_calls": "tool_call", "other": "stop"}
"""tether's finish reasons the output messages' schema names otherwise."""


def dumps(value: Any) -> str:
    """Compact JSON; whatever cannot be encoded is shown as its ``str``."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def system_instructions(system: str, redaction: Redaction) -> str:
    return dumps([{"type": "text", "content": redaction.text(system)}])


def input_messages(messages: Iterable[Message], redaction: Redaction) -> str:
    return dumps([_message(message, redaction) for message in messages])


def output_messages(message: Message, finish_reason: str, redaction: Redaction) -> str:
    shown = _message(message, redaction)
    shown["finish_reason"] = _FINISH.get(finish_reason, finish_reason)
    return dumps([shown])


def tool_definitions(tools: Sequence[ToolDefinition]) -> str:
    """The tools on offer, as the conventions describe them (their schemas are not secret)."""
    return dumps([{"type": "function", "name": t.name, "description": t.description,
                   "parameters": t.parameters} for t in tools])  # fmt: skip


def arguments(call: ToolCall, redaction: Redaction) -> str:
    """A tool call's arguments, secret-named values hidden; unparseable arguments as their redacted text."""
    if call.arguments is None:
        return dumps(redaction.text(call.raw_arguments or ""))
    return dumps(redaction.arguments(call.arguments))


def _message(message: Message, redaction: Redaction) -> dict[str, Any]:
    return {"role": message.role, "parts": [_part(part, redaction) for part in message.parts]}


def _part(part: Part, redaction: Redaction) -> dict[str, Any]:
    kind = type(part)
    if kind is Attachment:  # a reference, never the bytes
        assert isinstance(part, Attachment)
        where: dict[str, Any] = {"type": "uri", "uri": part.url} if part.url is not None else {"type": "blob"}
        return {**where, "mime_type": part.media_type, "modality": part.category, "size": part.size}
    if kind is Text or kind is Thinking:
        assert isinstance(part, Text | Thinking)
        return {"type": "text" if kind is Text else "reasoning", "content": redaction.text(part.text)}
    if kind is ToolCall:
        assert isinstance(part, ToolCall)
        shown = (
            redaction.arguments(part.arguments)
            if part.arguments is not None
            else redaction.text(part.raw_arguments or "")
        )
        return {"type": "tool_call", "id": part.id, "name": part.name, "arguments": shown}
    assert isinstance(part, ToolResult)
    return {"type": "tool_call_response", "id": part.call_id, "response": redaction.text(part.content)}
