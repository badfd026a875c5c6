"""Chat Completions wire forms read plainly, as test oracles independent of the provider's own decoder.

:func:`recorded_turn` is what a recorded answer says (text, reasoning, calls by index, finish, usage);
:func:`request_from` the tether ``Request`` a recorded request body encodes; :func:`essentials` the fields of
a request body that must match between our encoding and the recorded one.
"""

from __future__ import annotations

import json
from typing import Any

from tests.wire.events import Call, Streamed
from tests.wire.replay import Interaction
from tether.messages import Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ModelSettings, Request, ToolChoice, ToolDefinition
from tether.usage import Usage


def recorded_turn(interaction: Interaction) -> Streamed:
    """The answer as the recording has it: calls in ``index`` order, usage with the recorded prompt tokens as
    input tokens (cached ones included: add tether's ``cache_read_tokens`` back before comparing)."""
    if interaction.is_event_stream:
        chunks = [json.loads(data) for data in interaction.events_data() if data != "[DONE]"]
    else:
        whole = interaction.response_json()
        choice = whole["choices"][0]
        chunks = [{**whole, "choices": [{**choice, "delta": choice["message"]}]}]
    model = chunks[0].get("model")
    text = thinking = finish = ""
    calls: dict[int, list[str]] = {}
    usage: dict[str, Any] = {}
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            text += delta.get("content") or ""
            thinking += delta.get("reasoning_content") or delta.get("reasoning") or ""
            finish = choice.get("finish_reason") or finish
            for position, call in enumerate(delta.get("tool_calls") or []):
                entry = calls.setdefault(call.get("index", position), [call.get("id") or "", "", ""])
                entry[1] += call.get("function", {}).get("name") or ""
                entry[2] += call.get("function", {}).get("arguments") or ""
    details = usage.get("completion_tokens_details") or {}
    return Streamed(
        model,
        text,
        thinking,
        tuple(Call(*calls[index]) for index in sorted(calls)),
        finish,
        Usage(
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
            reasoning_tokens=details.get("reasoning_tokens") or 0,
        ),
        "",
    )


def request_from(body: dict[str, Any]) -> Request:
    """The ``Request`` that a recorded request body encodes (the recorded conversation, as tether messages)."""
    system = None
    messages: list[Message] = []
    names: dict[str, str] = {}
    for entry in body["messages"]:
        role, content = entry["role"], entry.get("content")
        if role == "system":
            system = content
        elif role == "user":
            messages.append(Message.user(content))
        elif role == "assistant":
            parts: list[Part] = []
            if reasoning := entry.get("reasoning_content") or entry.get("reasoning"):
                parts.append(Thinking(reasoning))
            if content:
                parts.append(Text(content))
            for call in entry.get("tool_calls") or []:
                function = call["function"]
                names[call["id"]] = function["name"]
                parts.append(
                    ToolCall(call["id"], function["name"], json.loads(function["arguments"]), function["arguments"])
                )
            messages.append(Message("assistant", tuple(parts)))
        else:
            result = ToolResult(entry["tool_call_id"], names[entry["tool_call_id"]], content)
            if messages and messages[-1].role == "tool":
                messages[-1] = Message("tool", (*messages[-1].parts, result))
            else:
                messages.append(Message("tool", (result,)))
    tools = tuple(
        ToolDefinition(t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"])
        for t in body.get("tools") or []
    )
    extra = {"response_format": body["response_format"]} if "response_format" in body else {}
    choice: ToolChoice = body.get("tool_choice", "auto")
    return Request(tuple(messages), system=system, tools=tools, tool_choice=choice, settings=ModelSettings(extra=extra))


def essentials(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request body that must match the recording.

    Left out on purpose, where our encoding legitimately differs from pydantic-ai's: ``n: 1`` (pydantic-ai
    sends the server's default explicitly), a tool's ``strict`` (pydantic-ai sets it on schemas it finds
    strict-compatible; we never do), an assistant message's ``reasoning`` (pydantic-ai echoes Ollama's
    reasoning back; tether does not send reasoning back over Chat Completions) and an absent ``content``
    against ``content: null`` (the same thing to every server).
    """
    return {
        "model": body.get("model"),
        "stream": body.get("stream"),
        "stream_options": body.get("stream_options"),
        "tool_choice": body.get("tool_choice"),
        "response_format": body.get("response_format"),
        "tools": [
            (t["function"]["name"], t["function"].get("description", ""), t["function"]["parameters"])
            for t in body.get("tools") or []
        ],
        "messages": [
            {
                "role": m["role"],
                "content": m.get("content"),
                "tool_calls": [
                    (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []
                ],
                "tool_call_id": m.get("tool_call_id"),
            }
            for m in body["messages"]
        ],
    }


def messages_essentials(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages part of :func:`essentials`: roles, content, tool calls and the ids results answer."""
    messages: list[dict[str, Any]] = essentials(body)["messages"]
    return messages
