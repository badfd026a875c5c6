"""End to end: an Agent on `openai-compatible:` runs a multi-turn tool loop against a local server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tests.helpers import assert_valid, check_order
from tether import Agent, Limits, tool
from tether.events import RunEvent, TextDelta
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES


class ToolLoopServer:
    """An OpenAI-compatible server playing a model that adds two numbers with a tool, then doubles the sum."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for the conversation so far."""
        tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
        if not tool_messages:
            return {"tool_calls": [_call("c1", "add", {"a": 17, "b": 25})]}
        if len(tool_messages) == 1:
            total = int(tool_messages[0]["content"])
            return {
                "content": "Now doubling. ",
                "tool_calls": [_call("c2", "add", {"a": total, "b": total}), _call("c3", "add", {"a": 0, "b": 1})],
            }
        return {"content": f"The answer is {tool_messages[-2]['content']}."}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        message = self.answer(body)
        finish = "tool_calls" if "tool_calls" in message else "stop"
        usage = {"prompt_tokens": 10 * len(body["messages"]), "completion_tokens": 7}
        if not body.get("stream"):
            choice = {"index": 0, "message": {"role": "assistant", "content": None, **message}, "finish_reason": finish}
            return web.json_response({"id": "r", "model": body["model"], "choices": [choice], "usage": usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in _chunks(body["model"], message, finish, usage):
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _chunks(model: str, message: dict[str, Any], finish: str, usage: dict[str, Any]) -> list[dict[str, Any]]:
    """The message streamed as a real server does: words, then calls by index with arguments in two pieces."""
    chunks: list[dict[str, Any]] = []
    for word in (message.get("content") or "").split(" "):
        if word:
            chunks.append({"id": "r", "model": model, "choices": [{"index": 0, "delta": {"content": word + " "}}]})
    for index, call in enumerate(message.get("tool_calls", [])):
        arguments = call["function"]["arguments"]
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": arguments[:5]},
        }
        chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]})
        chunks.append(
            {
                "choices": [
                    {"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": arguments[5:]}}]}}
                ]
            }
        )
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({"choices": [], "usage": usage})
    return chunks


@pytest.fixture
async def server() -> AsyncIterator[tuple[ToolLoopServer, str]]:
    model = ToolLoopServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", model.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield model, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.parametrize("stream", [True, False])
async def test_a_multi_turn_tool_loop_runs_against_an_openai_compatible_server(
    server: tuple[ToolLoopServer, str], stream: bool
) -> None:
    model, base_url = server
    events: list[RunEvent] = []
    provider = OpenAIChatProvider("test-model", profile=PROFILES["openai-compatible"], base_url=base_url, stream=stream)
    agent = Agent(provider, tools=[add], system="Use the tool.", limits=Limits(max_turns=5), on_event=events.append)
    result = await agent.run("What is (17 + 25) * 2?")
    assert result.stop_reason == "complete"
    assert result.text.strip() == "The answer is 84."
    assert result.turns == 3
    assert result.usage.requests == 3
    assert result.usage.output_tokens == 21
    assert [m.role for m in result.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [r.content for r in result.messages[5].tool_results] == ["84", "1"]
    assert_valid(result)
    check_order(events)
    if stream:
        assert sum(isinstance(e, TextDelta) for e in events) > 3, "text arrives in pieces, as it streams"
    last = model.requests[-1]
    assert last["messages"][0] == {"role": "system", "content": "Use the tool."}
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
    assert last["tools"][0]["function"]["name"] == "add"
    assert "Authorization" not in str(last)


async def test_a_continuation_sends_the_whole_conversation_back(server: tuple[ToolLoopServer, str]) -> None:
    model, base_url = server
    agent = Agent("openai-compatible:test-model", base_url=base_url, tools=[add])
    first = await agent.run("What is (17 + 25) * 2?")
    model.requests.clear()
    await agent.run("Thanks!", history=first.messages)
    sent = model.requests[0]["messages"]
    assert [m["role"] for m in sent][:7] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant"]
    assert sent[-1] == {"role": "user", "content": "Thanks!"}


async def test_an_api_key_is_sent_as_a_bearer_token_and_nowhere_else(server: tuple[ToolLoopServer, str]) -> None:
    model, base_url = server
    agent = Agent("openai-compatible:test-model", base_url=base_url, api_key="sk-secret-123", tools=[add])
    result = await agent.run("What is (17 + 25) * 2?")
    assert model.authorizations == ["Bearer sk-secret-123"] * 3
    assert "sk-secret-123" not in repr(agent.provider)
    assert "sk-secret-123" not in repr(result)


async def test_without_a_key_no_authorization_header_is_sent(server: tuple[ToolLoopServer, str]) -> None:
    model, base_url = server
    await Agent("openai-compatible:test-model", base_url=base_url, tools=[add]).run("What is (17 + 25) * 2?")
    assert model.authorizations == [None] * 3
