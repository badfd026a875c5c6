"""A conversation started with one provider continues with another: Anthropic, then OpenAI, then Gemini, then
Bedrock.

Each hop sends the whole history to a different API. What one provider needs replayed (Anthropic's thinking
signatures) means nothing to the next, whose API would reject it: it is dropped, while text, tool calls
and their results carry over with their ids.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.helpers import assert_valid
from tests.json_model import Model
from tether import Agent, tool
from tether.messages import Thinking
from tether.providers.anthropic import AnthropicProvider
from tether.providers.bedrock import BedrockProvider
from tether.providers.gemini import GeminiProvider
from tether.providers.openai_chat import OpenAIChatProvider

SIGNATURE = "anthropic-signature-EqQBCgIYAhIM"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def claude(body: dict[str, Any]) -> dict[str, Any]:
    """Thinks (signed), calls add, then answers with the sum."""
    answered = any(
        block.get("type") == "tool_result"
        for m in body["messages"]
        if isinstance(m["content"], list)
        for block in m["content"]
    )
    content: list[dict[str, Any]]
    if answered:
        content, stop = [{"type": "text", "text": "2 + 3 = 5."}], "end_turn"
    else:
        content = [
            {"type": "thinking", "thinking": "I should use the tool.", "signature": SIGNATURE},
            {"type": "tool_use", "id": "toolu_01", "name": "add", "input": {"a": 2, "b": 3}},
        ]
        stop = "tool_use"
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": content,
        "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": 5},
    }  # fmt: skip


def gpt(body: dict[str, Any]) -> dict[str, Any]:
    """Calls multiply once, then answers."""
    called = sum(1 for m in body["messages"] if m["role"] == "tool") > 1
    message: dict[str, Any] = {"role": "assistant", "content": "5 x 4 = 20." if called else None}
    if not called:
        call = {"name": "multiply", "arguments": json.dumps({"a": 5, "b": 4})}
        message["tool_calls"] = [{"id": "call_02", "type": "function", "function": call}]
    choice = {"index": 0, "message": message, "finish_reason": "stop" if called else "tool_calls"}
    return {
        "id": "c",
        "model": "gpt-4o-mini",
        "choices": [choice],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    }


def gemini(body: dict[str, Any]) -> dict[str, Any]:
    part = {"text": "All done: 20."}
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]}


def converse(body: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": [{"text": "Still 20."}]}
    return {"output": {"message": message}, "stopReason": "end_turn", "usage": {"inputTokens": 30, "outputTokens": 3}}


async def test_a_conversation_moves_from_anthropic_to_openai_to_gemini_to_bedrock(
    serve_model: Callable[[Model], Any],
) -> None:
    anthropic, openai, google, bedrock = (
        Model("/v1/messages", claude),
        Model("/v1/chat/completions", gpt),
        Model("/v1beta/models/gemini-2.5-flash:generateContent", gemini),
        Model("/model/{model}/converse", converse),
    )
    first = await Agent(
        AnthropicProvider(
            "claude-sonnet-4-5", base_url=await serve_model(anthropic) + "/v1", api_key="k", stream=False
        ),
        tools=[add, multiply],
        system="Be brief.",
    ).run("What is 2 + 3?")
    assert first.text == "2 + 3 = 5."
    assert any(isinstance(p, Thinking) and p.signature == SIGNATURE for m in first.messages for p in m.parts)
    assert SIGNATURE in json.dumps(anthropic.bodies[1]), "Anthropic gets its own signature back"

    second = await Agent(
        OpenAIChatProvider("gpt-4o-mini", base_url=await serve_model(openai) + "/v1", api_key="k", stream=False),
        tools=[add, multiply],
        system="Be brief.",
    ).run("And times 4?", history=first.messages)
    assert second.text == "5 x 4 = 20."
    sent = openai.bodies[0]
    assert SIGNATURE not in json.dumps(sent)
    assert "I should use the tool." not in json.dumps(sent), "another provider's thinking is dropped"
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent["messages"][2]["tool_calls"][0]["id"] == "toolu_01"
    assert json.loads(sent["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "toolu_01", "content": "5"}

    third = await Agent(
        GeminiProvider("gemini-2.5-flash", base_url=await serve_model(google) + "/v1beta", api_key="k", stream=False),
        tools=[add, multiply],
        system="Be brief.",
    ).run("Thanks. Summarize.", history=second.messages)
    assert third.text == "All done: 20."
    sent = google.bodies[0]
    assert SIGNATURE not in json.dumps(sent)
    assert "I should use the tool." not in json.dumps(sent)
    assert sent["systemInstruction"]["parts"][0]["text"] == "Be brief."
    parts = [part for content in sent["contents"] for part in content["parts"]]
    calls = [part["functionCall"] for part in parts if "functionCall" in part]
    responses = [part["functionResponse"] for part in parts if "functionResponse" in part]
    assert [(c["id"], c["name"], c["args"]) for c in calls] == [
        ("toolu_01", "add", {"a": 2, "b": 3}),
        ("call_02", "multiply", {"a": 5, "b": 4}),
    ]
    assert [(r["id"], r["response"]) for r in responses] == [
        ("toolu_01", {"ok": True, "result": 5}),
        ("call_02", {"ok": True, "result": 20}),
    ]
    assert not any(part.get("thought") for part in parts)

    fourth = await Agent(
        BedrockProvider(
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            region="us-east-1",
            base_url=await serve_model(bedrock),
            api_key="k",
            environ={},
            stream=False,
        ),
        tools=[add, multiply],
        system="Be brief.",
    ).run("Again?", history=third.messages)
    assert fourth.text == "Still 20."
    sent = bedrock.bodies[0]
    assert SIGNATURE not in json.dumps(sent)
    assert "I should use the tool." not in json.dumps(sent), "Anthropic's thinking means nothing on Bedrock"
    assert sent["system"] == [{"text": "Be brief."}]
    blocks = [block for message in sent["messages"] for block in message["content"]]
    assert [(b["toolUse"]["toolUseId"], b["toolUse"]["input"]) for b in blocks if "toolUse" in b] == [
        ("toolu_01", {"a": 2, "b": 3}),
        ("call_02", {"a": 5, "b": 4}),
    ]
    assert [b["toolResult"] for b in blocks if "toolResult" in b] == [
        {"toolUseId": "toolu_01", "content": [{"text": "5"}], "status": "success"},
        {"toolUseId": "call_02", "content": [{"text": "20"}], "status": "success"},
    ]
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"], "neighbours of one role are joined"
    for result in (first, second, third, fourth):
        assert_valid(result)
