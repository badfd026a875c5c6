"""Tool-call arguments nested too deep are bounded where they come in (a provider's stream, a JSON action, a
stored history): the call keeps no parsed arguments and a bounded raw text, the model gets a clear
``invalid_arguments`` result, the events keep their order, and the transcript can still be saved and sent."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import assert_valid, check_order
from tether import Agent, tool
from tether.events import RunEvent, TurnCompleted
from tether.loop.arguments import (
    KEPT_RAW_ARGUMENTS,
    MAX_ARGUMENT_DEPTH,
    TOO_DEEP_MARK,
    arguments_problem,
    nests_deeper,
    read_arguments,
)
from tether.messages import Message, ToolCall, ToolResult
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.sessions import SQLiteSessionStore

TOO_DEEP = f"nested more than {MAX_ARGUMENT_DEPTH} levels deep"
VERY_DEEP = 50_000


def nested_text(depth: int, objects: list[bool]) -> str:
    """Arguments ``{"v": ...}`` nesting ``depth`` levels in all (the arguments object is the first): each
    level below is an object or an array as ``objects`` says, cyclically."""
    opens, closes = [], []
    for level in range(depth - 1):
        is_object = objects[level % len(objects)]
        opens.append('{"k": ' if is_object else "[")
        closes.append("}" if is_object else "]")
    return '{"v": ' + "".join(opens) + "1" + "".join(reversed(closes)) + "}"


def nested_value(depth: int) -> dict[str, Any]:
    """A dict nesting ``depth`` levels, built without recursion."""
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return {"v": value}


@tool
def take(v: Any) -> str:
    """Take anything."""
    return "took it"


# --- the accumulator and its helpers ------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_DEPTH + 1, 1_000, VERY_DEEP])
def test_arguments_nested_too_deep_are_not_parsed_and_their_raw_text_is_bounded(depth: int) -> None:
    raw = nested_text(depth, [True, False])
    arguments, kept = read_arguments(raw)
    assert arguments is None
    assert kept == raw[:KEPT_RAW_ARGUMENTS] + TOO_DEEP_MARK
    assert arguments_problem(kept).startswith(f"they are {TOO_DEEP}")


def test_arguments_at_the_limit_are_parsed_whole() -> None:
    raw = nested_text(MAX_ARGUMENT_DEPTH, [False])
    arguments, kept = read_arguments(raw)
    assert arguments == json.loads(raw)
    assert kept == raw


def test_a_cycle_counts_as_too_deep_and_shared_values_are_cheap() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert nests_deeper({"a": cycle}, MAX_ARGUMENT_DEPTH)
    shared: Any = [1]
    for _ in range(60):  # 2**60 paths, 61 levels: walked once per level, not once per path
        shared = [shared, shared]
    assert not nests_deeper({"a": shared}, MAX_ARGUMENT_DEPTH)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"a": ', "they are not valid JSON (Expecting value: line 1 column 7 (char 6))"),
        ("[1, 2]", "they are a JSON array, not an object"),
        ('"text"', "they are a JSON string, not an object"),
    ],
)
def test_the_problem_with_unusable_arguments_is_said_plainly(raw: str, problem: str) -> None:
    assert arguments_problem(raw) == problem


# --- a whole run ----------------------------------------------------------------------------------------------


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    depth=st.integers(MAX_ARGUMENT_DEPTH - 3, MAX_ARGUMENT_DEPTH + 3) | st.integers(1, 3_000),
    objects=st.lists(st.booleans(), min_size=1, max_size=4),
)
def test_a_run_answers_arguments_of_any_depth_in_order_and_saves_them(
    tmp_path: Path, depth: int, objects: list[bool]
) -> None:
    raw = nested_text(depth, objects)

    async def scenario() -> None:
        events: list[RunEvent] = []
        model = ScriptedProvider([call("take", raw), reply("done")])
        async with SQLiteSessionStore(tmp_path / f"{uuid.uuid4().hex}.db") as store:
            agent = Agent(model, tools=[take], store=store, on_event=events.append)
            result = await agent.run("go", session="s")
            saved = await store.load("s")
        assert result.stop_reason == "complete", result.detail
        check_order(events)
        assert_valid(result)
        assert saved.messages == result.messages
        (answer,) = result.messages[2].tool_results
        if depth <= MAX_ARGUMENT_DEPTH:
            assert (answer.content, answer.code) == ("took it", None)
        else:
            assert answer.code == "invalid_arguments"
            assert TOO_DEEP in answer.content
            (stored_call,) = saved.messages[1].tool_calls
            assert stored_call.arguments is None
            assert len(stored_call.raw_arguments or "") <= KEPT_RAW_ARGUMENTS + len(TOO_DEEP_MARK)

    asyncio.run(scenario())


class DeepCallServer:
    """An OpenAI-compatible server playing a model that calls ``take`` with the given raw arguments, then
    answers "done"; it records every request body."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if any(m["role"] == "tool" for m in body["messages"]):
            message: dict[str, Any] = {"role": "assistant", "content": "done"}
        else:
            function = {"name": "take", "arguments": self.raw}
            calls = [{"id": "c1", "type": "function", "function": function}]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}
        return web.json_response({"id": "r", "model": body["model"], "choices": [choice]})


@pytest.fixture
async def deep_server() -> AsyncIterator[tuple[DeepCallServer, OpenAIChatProvider]]:
    model = DeepCallServer(nested_text(VERY_DEEP, [True, False, False]))
    app = web.Application(client_max_size=10 * 2**20)
    app.router.add_post("/v1/chat/completions", model.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    yield model, OpenAIChatProvider("m", profile=PROFILES["openai-compatible"], base_url=base_url, stream=False)
    await runner.cleanup()


async def test_arguments_tens_of_thousands_deep_from_a_server_are_answered_saved_and_sent_back(
    deep_server: tuple[DeepCallServer, OpenAIChatProvider], tmp_path: Path
) -> None:
    server, provider = deep_server
    events: list[RunEvent] = []
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        result = await Agent(provider, tools=[take], store=store, on_event=events.append).run("go", session="s")
        saved = await store.load("s")
    assert result.stop_reason == "complete", result.detail
    assert result.text == "done"
    check_order(events)
    assert saved.messages == result.messages
    sent_back = server.requests[1]["messages"]
    assert sent_back[1]["tool_calls"][0]["function"]["arguments"].endswith(TOO_DEEP_MARK)
    assert TOO_DEEP in sent_back[2]["content"]
    assert sent_back[2]["content"].startswith("Invalid arguments for tool 'take'")


async def test_a_stored_history_with_arguments_too_deep_can_be_continued(
    deep_server: tuple[DeepCallServer, OpenAIChatProvider],
) -> None:
    server, provider = deep_server
    server.raw = "{}"
    deep = ToolCall("old", "take", nested_value(5_000), None)
    history = [
        Message.user("earlier"),
        Message("assistant", (deep,)),
        Message("tool", (ToolResult("old", "take", "took it"),)),
        Message.assistant("ok"),
    ]
    result = await Agent(provider, tools=[take]).run("again", history=history)
    assert result.stop_reason == "complete", result.detail
    (kept,) = result.messages[1].tool_calls
    assert kept.arguments is None
    assert kept.raw_arguments == TOO_DEEP_MARK
    assert server.requests[0]["messages"][1]["tool_calls"][0]["function"]["arguments"] == TOO_DEEP_MARK


# --- JSON action mode ---------------------------------------------------------------------------------------


def action(arguments_text: str) -> str:
    return '{"type": "tool_call", "name": "take", "arguments": ' + arguments_text + "}"


async def test_a_json_action_with_arguments_too_deep_is_answered_invalid_arguments() -> None:
    events: list[RunEvent] = []
    model = ScriptedProvider(
        [reply(action(nested_text(MAX_ARGUMENT_DEPTH + 1, [True]))), reply('{"type": "final", "text": "ok"}')],
        supports_tools=False,
    )
    result = await Agent(model, tools=[take], on_event=events.append).run("go")
    assert result.text == "ok"
    check_order(events)
    (answer,) = result.messages[2].tool_results
    assert answer.code == "invalid_arguments"
    assert TOO_DEEP in answer.content


async def test_a_json_action_too_deep_to_read_is_rejected_with_a_reason_and_the_turn_completes() -> None:
    events: list[RunEvent] = []
    model = ScriptedProvider(
        [reply(action(nested_text(VERY_DEEP, [True]))), reply('{"type": "final", "text": "ok"}')],
        supports_tools=False,
    )
    result = await Agent(model, tools=[take], on_event=events.append).run("go")
    assert result.text == "ok"
    check_order(events)
    rejected = [e.rejected for e in events if isinstance(e, TurnCompleted) and e.rejected]
    assert rejected == [
        "the answer was not one valid JSON action: the JSON object in the answer is nested too deeply to read; "
        f"arguments may nest at most {MAX_ARGUMENT_DEPTH} levels"
    ]
