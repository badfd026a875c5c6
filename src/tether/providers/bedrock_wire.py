"""Bedrock's Converse API: tether's request as its JSON body (the same body for ``/converse`` and
``/converse-stream``).

* ``system``: the run's system prompt and the system messages, one ``{"text"}`` block each.
* ``messages``: ``user`` and ``assistant`` messages of content blocks, neighbours of one role joined (so the
  results of one turn's calls go back together, in order). User blocks: ``text``; ``image``
  (``{"format": "png"|"jpeg"|"gif"|"webp", "source": {"bytes": <base64>}}``); ``document`` (``{"format",
  "name", "source": {"bytes"}}``; a text document goes as its text); ``toolResult`` (``{"toolUseId",
  "content": [{"text"}, images, documents], "status": "success"|"error"}``). Assistant blocks: ``text``,
  ``toolUse`` (``{"toolUseId", "name", "input"}``) and ``reasoningContent``. Bedrock fetches nothing by URL
  (only S3 locations): an attachment given by URL is refused before anything is sent, and so is audio.
* Reasoning: a ``Thinking`` part goes back only when this provider wrote it (``provider_data["origin"] ==
  "bedrock"``), as ``{"reasoningContent": {"reasoningText": {"text", "signature"}}}``, or, redacted, as
  ``{"reasoningContent": {"redactedContent": <base64>}}``; another provider's reasoning is dropped (Bedrock's
  models cannot verify a foreign signature).
* ``toolConfig``: ``{"tools": [{"toolSpec": {"name", "description", "inputSchema": {"json"}}}],
  "toolChoice": {"auto": {}} | {"any": {}} | {"tool": {"name"}}}``. Converse has no "none": for a request
  whose choice is ``"none"`` the tools are left out (``base.py``'s contract), unless the history holds tool
  calls or results, which Converse refuses without a ``toolConfig``: the tools are then listed without a
  ``toolChoice`` (the model's own choice), and the loop drops any call such a tools-off request brings back.
  A request with no tools at all whose history holds tool calls (an agent without tools continuing another's
  conversation) lists the history's tools as retired ones, each with an empty schema.
* ``inferenceConfig``: ``maxTokens``, ``temperature``, ``topP`` (``stopSequences`` through ``extra``).
* A typed output with a schema: ``outputConfig.textFormat`` of type ``json_schema``, the schema sent as a JSON
  string, as the API reference has it.
* ``ModelSettings.extra`` is merged into the body: model fields Converse does not name go under
  ``additionalModelRequestFields`` (``{"additionalModelRequestFields": {"thinking": {"type": "enabled",
  "budget_tokens": 2048}}}`` switches Claude's reasoning on).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import msgspec

from tether.errors import ConfigInvalid
from tether.messages import Attachment, Message, Text, Thinking, ToolCall, ToolResult
from tether.providers.attachments import MB, base64_of, check_inline, document_text, is_text_document, refuse_url
from tether.providers.base import ForceTool, Request, ToolChoice, ToolDefinition, merge_extra

__all__ = ["ORIGIN", "encode_body", "encode_messages", "encode_tool", "encode_tool_choice"]

ORIGIN = "bedrock"
"""``provider_data["origin"]`` of the data this provider needs back."""
IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
IMAGE_LIMIT = 3_750_000
"""An image's bytes (Converse's documented limit: 3.75 MB each)."""
DOCUMENT_LIMIT = int(4.5 * MB)
"""A document's bytes (Converse's documented limit: 4.5 MB each)."""
_NAME = re.compile(r"[^A-Za-z0-9\s\-()\[\]]+")
"""What a document's name may not hold (Converse takes letters, digits, single spaces, hyphens, brackets)."""


def encode_body(request: Request) -> dict[str, Any]:
    """The Converse body for ``request``, as plain data."""
    messages = encode_messages(m for m in request.messages if m.role != "system")
    system = [m.text for m in request.messages if m.role == "system" and m.text]
    if request.system:
        system.insert(0, request.system)
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = [{"text": text} for text in system]
    settings = request.settings
    config = {
        key: value
        for key, value in (
            ("maxTokens", settings.max_tokens),
            ("temperature", settings.temperature),
            ("topP", settings.top_p),
        )
        if value is not None
    }
    if config:
        body["inferenceConfig"] = config
    none = request.tool_choice == "none"
    if request.tools and (not none or _holds_tool_blocks(messages)):
        body["toolConfig"] = {"tools": [encode_tool(tool) for tool in request.tools]}
        if not none:
            body["toolConfig"]["toolChoice"] = encode_tool_choice(request.tool_choice)
    elif not request.tools and (used := _history_tool_names(messages)):
        body["toolConfig"] = {"tools": [_retired_tool(name) for name in used]}
    if (output := request.output) is not None and output.schema is not None:
        schema = {"schema": msgspec.json.encode(output.schema).decode(), "name": output.name}
        body["outputConfig"] = {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": schema}}}
    merge_extra(body, settings.extra)
    if none and isinstance(body.get("toolConfig"), dict):  # the loop's tools-off call: extra must not force a call
        body["toolConfig"].pop("toolChoice", None)
    return body


def _holds_tool_blocks(messages: list[dict[str, Any]]) -> bool:
    """Whether the history has ``toolUse`` or ``toolResult`` blocks, which Converse refuses without a
    ``toolConfig``."""
    return any("toolUse" in block or "toolResult" in block for message in messages for block in message["content"])


def _history_tool_names(messages: list[dict[str, Any]]) -> list[str]:
    """The names of the tools the history's ``toolUse`` blocks called, in order of first use."""
    names = (block["toolUse"]["name"] for message in messages for block in message["content"] if "toolUse" in block)
    return list(dict.fromkeys(names))


def _retired_tool(name: str) -> dict[str, Any]:
    """A ``toolSpec`` for a tool the history called but this request does not offer (a history continued by an
    agent with no tools, after a handoff or a fallback): Converse refuses ``toolUse`` blocks without a
    ``toolConfig`` naming them. A call the model makes to it anyway is answered as an unknown tool."""
    description = "No longer available: it appears only in the conversation so far."
    return {"toolSpec": {"name": name, "description": description, "inputSchema": {"json": {"type": "object"}}}}


def encode_tool(tool: ToolDefinition) -> dict[str, Any]:
    """A tool as a ``toolSpec``."""
    return {"toolSpec": {"name": tool.name, "description": tool.description, "inputSchema": {"json": tool.parameters}}}


def encode_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    """``toolChoice`` for ``"auto"``, ``"required"`` (``any``) or a forced tool (``"none"`` leaves the tools out)."""
    if isinstance(choice, ForceTool):
        return {"tool": {"name": choice.name}}
    return {"any": {}} if choice == "required" else {"auto": {}}


def encode_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as Converse ``messages``: a message with nothing to send is left out, neighbours of one role joined."""
    encoded: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = assistant_blocks(message) if role == "assistant" else user_blocks(message)
        if not blocks:
            continue
        if encoded and encoded[-1]["role"] == role:
            encoded[-1]["content"] += blocks
        else:
            encoded.append({"role": role, "content": blocks})
    return encoded


def user_blocks(message: Message) -> list[dict[str, Any]]:
    """A user or tool message's text, attachments and tool results, in order (Converse refuses empty text)."""
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if type(part) is ToolResult:
            content: list[dict[str, Any]] = [{"text": part.content}] if part.content or not part.attachments else []
            content += [attachment_block(a) for a in part.attachments]
            result = {"toolUseId": part.call_id, "content": content, "status": "error" if part.is_error else "success"}
            blocks.append({"toolResult": result})
        elif type(part) is Text and part.text:
            blocks.append({"text": part.text})
        elif type(part) is Attachment:
            blocks.append(attachment_block(part))
    return blocks


def assistant_blocks(message: Message) -> list[dict[str, Any]]:
    """An assistant message's reasoning (its own only), text and tool calls, in order."""
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if type(part) is Text:
            if part.text:
                blocks.append({"text": part.text})
        elif type(part) is ToolCall:
            arguments = part.arguments if part.arguments is not None else {}
            blocks.append({"toolUse": {"toolUseId": part.id, "name": part.name, "input": arguments}})
        elif type(part) is Thinking and (reasoning := reasoning_block(part)) is not None:
            blocks.append(reasoning)
    return blocks


def reasoning_block(part: Thinking) -> dict[str, Any] | None:
    """The ``reasoningContent`` block to send a thinking part back as; ``None`` for a foreign one."""
    data = part.provider_data or {}
    if data.get("origin") != ORIGIN:
        return None
    if data.get("redacted"):
        return {"reasoningContent": {"redactedContent": part.signature or ""}} if part.signature else None
    if not (part.text or part.signature):
        return None
    text: dict[str, Any] = {"text": part.text}
    if part.signature:
        text["signature"] = part.signature
    return {"reasoningContent": {"reasoningText": text}}


def attachment_block(attachment: Attachment) -> dict[str, Any]:
    """An ``image`` or ``document`` block, base64; a text document as its text."""
    api = "Bedrock's Converse API"
    refuse_url(attachment, api)
    if attachment.category == "audio":
        raise ConfigInvalid(f"{api} takes no audio ({attachment.media_type})")
    if attachment.category == "image":
        image_format = IMAGE_FORMATS.get(attachment.media_type)
        if image_format is None:
            raise ConfigInvalid(f"{api} takes PNG, JPEG, GIF and WebP images, not {attachment.media_type}")
        check_inline(attachment, IMAGE_LIMIT, f"{api} (an image)")
        return {"image": {"format": image_format, "source": {"bytes": base64_of(attachment)}}}
    if is_text_document(attachment):
        return {"text": document_text(attachment)}
    document_format = DOCUMENT_FORMATS.get(attachment.media_type)
    if document_format is None:
        raise ConfigInvalid(f"{api} takes no document of type {attachment.media_type}")
    check_inline(attachment, DOCUMENT_LIMIT, f"{api} (a document)")
    name = " ".join(_NAME.sub(" ", (attachment.name or "document").rsplit(".", 1)[0]).split()) or "document"
    return {"document": {"format": document_format, "name": name, "source": {"bytes": base64_of(attachment)}}}
