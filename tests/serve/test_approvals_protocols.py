"""Approvals through the protocols, over real HTTP: AG-UI (``/agui``) and the AI SDK's ``useChat`` (``/api/chat``).

A paused run ends its stream with the waiting calls announced but unanswered (AG-UI: ``RUN_FINISHED`` with the
interrupt outcome; AI SDK: ``tool-input-available`` then ``finish`` whose metadata says ``paused`` and lists the
pending calls). The client answers in its own terms (AG-UI tool messages or resume entries, the AI SDK's
``addToolResult`` output) and the run goes on. Each stream is checked with the protocol tests' validators; the
paused and resumed streams together must read as one valid stream (the call started in the first, its result in
the second).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from ag_ui.core import EventType

from tether import Agent
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, reply

from . import test_agui, test_vercel
from .served import parse_sse, served
from .test_approvals import RAN, pick_color, wire


def paying_agent() -> Agent[Any, Any]:
    model = ScriptedProvider(
        [call("wire", {"amount": 10, "api_key": "sk-live-0123456789abcdef"}, id="call_w"), reply("Done.")]
    )
    return Agent(model, tools=[wire])


async def agui_run(http: aiohttp.ClientSession, base: str, body: dict[str, Any]) -> tuple[int, list[Any]]:
    async with http.post(base + "/agui", json=body) as response:
        text = await response.text()
        if response.status != 200:
            return response.status, [json.loads(text)]
        return 200, [test_agui.read_back(f"data: {data}\n\n") for _, data in parse_sse(text)]


def agui_body(messages: list[dict[str, Any]], run: str, **more: Any) -> dict[str, Any]:
    return {"threadId": "thread-pay", "runId": run, "messages": messages, **more}


ASKED = [{"id": "u1", "role": "user", "content": "pay"}]


def with_paused_call(arguments: str) -> list[dict[str, Any]]:
    """The conversation as an AG-UI client holds it after the paused run: the waiting call with no result."""
    tool_call = {"id": "call_w", "type": "function", "function": {"name": "wire", "arguments": arguments}}
    return [*ASKED, {"id": "a1", "role": "assistant", "content": "", "toolCalls": [tool_call]}]


async def test_agui_a_paused_run_finishes_interrupted_and_a_tool_message_approves_it() -> None:
    RAN.clear()
    async with served(paying_agent().to_asgi()) as server, aiohttp.ClientSession() as http:
        status, paused = await agui_run(http, server.base, agui_body(ASKED, "run-1"))
        assert status == 200
        assert test_agui.order_problems(paused) == []
        finished = paused[-1]
        assert finished.type == EventType.RUN_FINISHED
        assert finished.outcome.type == "interrupt"
        [interrupt] = finished.outcome.interrupts
        assert (interrupt.id, interrupt.tool_call_id, interrupt.reason) == ("call_w", "call_w", "tool_approval")
        assert finished.result["pending"][0]["tool"] == "wire"
        assert [e.type for e in test_agui.of_type(paused, EventType.TOOL_CALL_RESULT)] == []
        [args] = test_agui.of_type(paused, EventType.TOOL_CALL_ARGS)
        assert "sk-live-0123456789abcdef" not in args.delta
        assert RAN == []

        answer = {"id": "t1", "role": "tool", "toolCallId": "call_w", "content": json.dumps({"approved": True})}
        messages = [*with_paused_call(args.delta), answer]
        status, resumed = await agui_run(http, server.base, agui_body(messages, "run-2"))
        assert status == 200, resumed
        assert resumed[-1].type == EventType.RUN_FINISHED
        assert resumed[-1].outcome.type == "success"
        [result] = test_agui.of_type(resumed, EventType.TOOL_CALL_RESULT)
        assert (result.tool_call_id, result.content) == ("call_w", "wired 10")
        assert test_agui.of_type(resumed, EventType.TOOL_CALL_START) == [], "the waiting call was announced before"
        assert test_agui.order_problems(paused[:-1] + resumed[1:]) == []
    assert RAN == ["wire 10"]


async def test_agui_resume_entries_answer_the_interrupts_and_a_refusal_runs_nothing() -> None:
    RAN.clear()
    async with served(paying_agent().to_asgi()) as server, aiohttp.ClientSession() as http:
        _, paused = await agui_run(http, server.base, agui_body(ASKED, "run-1"))
        [args] = test_agui.of_type(paused, EventType.TOOL_CALL_ARGS)
        wrong = [{"interruptId": "call_w", "status": "resolved", "payload": "sure"}]
        status, error = await agui_run(http, server.base, agui_body(with_paused_call(args.delta), "r", resume=wrong))
        assert status == 400
        assert error[0]["error"]["code"] == "decision_invalid"
        refused = [{"interruptId": "call_w", "status": "resolved", "payload": {"approved": False, "reason": "no"}}]
        status, resumed = await agui_run(
            http, server.base, agui_body(with_paused_call(args.delta), "run-2", resume=refused)
        )
        assert status == 200
        [result] = test_agui.of_type(resumed, EventType.TOOL_CALL_RESULT)
        assert result.content == "no"
    assert RAN == []


def chat_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "chat-pay", "messages": messages, "trigger": "submit-message"}


async def chat_run(http: aiohttp.ClientSession, base: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(base + "/api/chat", json=body) as response:
        text = await response.text()
        if response.status != 200:
            return response.status, json.loads(text)
        return 200, test_vercel.read_back(text)


CHAT_ASKED = [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "which color?"}]}]


async def test_use_chat_a_paused_run_finishes_paused_and_add_tool_result_resumes_it() -> None:
    model = ScriptedProvider([call("pick_color", {"question": "which?"}, id="call_c"), reply("Blue it is.")])
    async with served(Agent(model, tools=[pick_color]).to_asgi()) as server, aiohttp.ClientSession() as http:
        status, paused = await chat_run(http, server.base, chat_body(CHAT_ASKED))
        assert status == 200
        assert test_vercel.order_problems(paused) == []
        assert [p["toolCallId"] for p in test_vercel.of_type(paused, "tool-input-available")] == ["call_c"]
        assert test_vercel.of_type(paused, "tool-output-available") == []
        meta = paused[-1]["messageMetadata"]
        assert meta["stopReason"] == "paused"
        assert [(p["id"], p["kind"]) for p in meta["pending"]] == [("call_c", "external")]

        part = {
            "type": "tool-pick_color",
            "toolCallId": "call_c",
            "state": "output-available",
            "input": {"question": "which?"},
            "output": {"color": "blue"},
        }
        assistant = {"id": paused[0]["messageId"], "role": "assistant", "parts": [{"type": "step-start"}, part]}
        status, resumed = await chat_run(http, server.base, chat_body([*CHAT_ASKED, assistant]))
        assert status == 200, resumed
        assert resumed[-1]["messageMetadata"]["stopReason"] == "complete"
        assert "".join(p["delta"] for p in test_vercel.of_type(resumed, "text-delta")) == "Blue it is."
        assert test_vercel.order_problems(paused[:-1] + resumed[1:]) == []
    answered = [p for m in model.requests[-1].messages for p in m.parts if isinstance(p, ToolResult)]
    assert [r.call_id for r in answered] == ["call_c"]
    assert "blue" in answered[0].content


async def test_the_official_clients_read_a_pause_and_their_answer_resumes_the_run() -> None:
    """AG-UI's ``HttpAgent`` (``verifyEvents``) and the AI SDK's transport (each chunk validated), in Node, against
    the served app: each reads the paused run, answers it its own way, and reads the rest."""
    from .test_clients import CLIENTS, NODE, clients_installed

    clients_installed.__wrapped__()  # type: ignore[attr-defined]  # the fixture's body: npm ci, or a skip
    assert NODE is not None
    RAN.clear()
    model = ScriptedProvider(
        [
            call("wire", {"amount": 10, "api_key": "sk-live-0123456789abcdef"}, id="call_w"),
            reply("Done."),
            call("pick_color", {"question": "which?"}, id="call_c"),
            reply("Blue it is."),
        ]
    )
    async with served(Agent(model, tools=[wire, pick_color]).to_asgi()) as server:
        node = await asyncio.create_subprocess_exec(
            NODE, str(CLIENTS / "approve.mjs"), server.base,
            cwd=CLIENTS, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await node.communicate()
    assert node.returncode == 0, err.decode()
    seen = {line["protocol"]: line for line in map(json.loads, out.decode().splitlines())}
    agui_seen, chat = seen["agui"], seen["chat"]
    assert "thrown" not in agui_seen, agui_seen
    assert agui_seen["waiting"] == "wire"
    assert agui_seen["answeredBefore"] is False
    assert agui_seen["interrupts"] == [{"id": "call_w", "reason": "tool_approval", "toolCallId": "call_w"}]
    assert agui_seen["left"] == 0
    assert [m["role"] for m in agui_seen["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert agui_seen["messages"][-2]["content"] == "wired 10"
    assert agui_seen["messages"][-1]["content"] == "Done."
    assert RAN == ["wire 10"]
    assert "thrown" not in chat, chat
    assert chat["errors"] == []
    assert chat["pausedState"] == "input-available"
    assert chat["pausedMeta"]["stopReason"] == "paused"
    assert chat["meta"]["stopReason"] == "complete"
    assert ("tool-pick_color", "output-available") in [(p["type"], p["state"]) for p in chat["parts"]]
    assert chat["parts"][-1]["text"] == "Blue it is."
