"""Document 001 (Bob v1: the agent loop as a six-state machine with a JSON action mode), its test cases TC-01..TC-10
and its guards, configuration and error rules, against tether's public API (docs/conformance.md, section 001).

Bob answers in JSON actions only; tether does so with ``tool_mode="json"`` (or by itself for a model without
native tool calls), which is how these tests run it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import MockLLM, Say
from tests.mcp.conftest import py_server
from tether import Agent, Limits, Message, StopReason, tool
from tether.config import load
from tether.providers import (
    LlmEvent,
    ModelInfo,
    Request,
    ScriptedProvider,
    StreamEnd,
    StreamStart,
    TextDelta,
    Usage,
    hang,
    reply,
)
from tether.sessions import MemorySessionStore
from tether.testing import assert_valid_transcript
from tether.tools import MCPTools


def action(**fields: Any) -> str:
    return json.dumps(fields)


def bob(*answers: str) -> ScriptedProvider:
    """A model that can only answer in text, as Bob's models do (tether then speaks JSON actions to it)."""
    return ScriptedProvider([reply(a) for a in answers], supports_tools=False)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_001_tc01_hello_without_tools_returns_the_final_actions_content() -> None:
    model = bob(action(type="final", text="Hello! How can I help?"))
    result = await Agent(model, tool_mode="json").run("Hello")
    assert (result.text, result.stop_reason) == ("Hello! How can I help?", StopReason.COMPLETE)
    assert model.requests[0].system is not None
    assert '"type": "answer"' in model.requests[0].system, "the final action, named as an answer"


async def test_001_tc02_a_tool_call_action_runs_the_tool_then_the_final_action_answers() -> None:
    model = bob(action(type="tool_call", name="add", arguments={"a": 17, "b": 25}), action(type="final", text="42"))
    result = await Agent(model, tools=[add]).run("17+25?")
    assert (result.text, result.stop_reason) == ("42", StopReason.COMPLETE)
    first, second = model.requests
    assert first.system is not None
    assert "- add: Add two integers." in first.system, "tool schemas are in the prompt"
    assert second.messages[-1] == Message.user("Tool add returned: 42")
    assert_valid_transcript(result)


async def test_001_tc03_invalid_json_is_re_prompted_once_then_succeeds() -> None:
    model = bob("I think the answer is 42", action(type="final", text="42"))
    result = await Agent(model, tools=[add]).run("17+25?")
    assert (result.text, result.stop_reason) == ("42", StopReason.COMPLETE)
    assert "not one valid JSON action" in model.requests[1].messages[-1].text


async def test_001_tc04_invalid_json_twice_ends_the_run_as_invalid_response() -> None:
    model = bob("not json", '{"type": "tool_call", "name": "add"')
    result = await Agent(model, tools=[add]).run("17+25?")
    assert result.stop_reason == StopReason.INVALID_RESPONSE
    assert result.degraded
    assert len(model.requests) == 2


async def test_001_tc05_a_turn_past_max_steps_stops_as_a_guard_with_an_answer() -> None:
    calls = [action(type="tool_call", name="add", arguments={"a": n, "b": 1}) for n in range(3)]
    model = bob(*calls, action(type="final", text="2"))
    result = await Agent(model, tools=[add], limits=Limits(max_turns=3)).run("go")
    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.degraded
    assert result.text == "2"


async def test_001_tc06_cancellation_mid_turn_returns_cancelled() -> None:
    handle = Agent(ScriptedProvider([hang()]), tool_mode="json").start("go")
    await asyncio.sleep(0)
    handle.cancel()
    result = await handle
    assert result.stop_reason == StopReason.CANCELLED
    assert_valid_transcript(result)


async def test_001_tc07_a_tool_timeout_appends_an_error_result_and_the_loop_continues() -> None:
    @tool
    async def slow() -> str:
        """Too slow."""
        await asyncio.Event().wait()
        return "unreachable"

    model = bob(action(type="tool_call", name="slow", arguments={}), action(type="final", text="gave up"))
    result = await Agent(model, tools=[slow], limits=Limits(tool_timeout=0.05)).run("go")
    (timed_out,) = result.messages[2].tool_results
    assert (timed_out.is_error, timed_out.code) == (True, "tool_timeout")
    assert (result.text, result.stop_reason) == ("gave up", StopReason.COMPLETE)


async def test_001_tc08_a_session_round_trips_through_the_in_memory_store() -> None:
    store = MemorySessionStore()
    model = bob(action(type="tool_call", name="add", arguments={"a": 2, "b": 3}), action(type="final", text="5"))
    agent = Agent(model, tools=[add], store=store)
    assert [s.id for s in await store.list()] == []
    result = await agent.run("2+3?", session="s1")
    saved = await store.load("s1")
    assert saved.messages == result.messages
    assert [m.role for m in saved.messages] == ["user", "assistant", "tool", "assistant"]


async def test_001_f11_one_in_memory_store_serves_concurrent_runs_of_different_sessions() -> None:
    store = MemorySessionStore()
    agent = Agent(ScriptedProvider.echo(), store=store)
    results = await asyncio.gather(*(agent.run(f"message {n}", session=f"s{n}") for n in range(8)))
    for n, result in enumerate(results):
        saved = await store.load(f"s{n}")
        assert saved.messages == result.messages
        assert saved.messages[-1].text == f"message {n}"


class OwnPort:
    """A provider of the host's own making: only the ``Provider`` protocol, no tether base class."""

    info = ModelInfo(provider="own", name="port")

    def __init__(self) -> None:
        self.seen: list[Request] = []

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        self.seen.append(request)
        yield StreamStart()
        yield TextDelta(f"{len(request.messages)} message(s) seen")
        yield StreamEnd("stop", Usage(input_tokens=3, output_tokens=4))


async def test_001_p03_the_loop_reaches_a_model_only_through_the_provider_protocol() -> None:
    port = OwnPort()
    result = await Agent(port).run("hi")
    assert (result.text, result.stop_reason) == ("1 message(s) seen", StopReason.COMPLETE)
    assert result.usage.output_tokens == 4
    assert [m.text for m in port.seen[0].messages] == ["hi"]


async def test_001_tc09_mcp_tools_are_discovered_from_a_real_server() -> None:
    async with MCPTools([py_server()]) as mcp:
        tools = {t.name: t for t in mcp.tools}
        assert {"add", "echo"} <= set(tools)
        assert sorted(tools["add"].parameters["required"]) == ["a", "b"]
        model = bob(action(type="tool_call", name="add", arguments={"a": 2, "b": 3}), action(type="final", text="5"))
        result = await Agent(model, tools=mcp.tools).run("2+3?")
    assert [r.content for m in result.messages for r in m.tool_results] == ["5"]


def test_001_tc10_the_chat_repl_starts_accepts_input_and_answers(tmp_path: Path) -> None:
    project = Project(tmp_path, tmp_path / "home")
    for folder in (project.cwd, project.home):
        folder.mkdir(parents=True)
    with MockLLM([Say("Hello from the model.")]) as server:
        project.use(server)
        child = project.spawn("chat")
        try:
            child.expect_exact("tether>")
            child.sendline("Hello")
            child.expect_exact("Hello from the model.")
            child.expect_exact("tether>")
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0, screen(child)
    assert len(server.requests) == 1


# --- the guards, the configuration, the error rules ----------------------------------------------------------


async def test_001_g_max_tool_calls_stops_the_run_exactly() -> None:
    model = bob(*[action(type="tool_call", name="add", arguments={"a": n, "b": 1}) for n in range(3)])
    result = await Agent(model, tools=[add], limits=Limits(max_tool_calls=2)).run("go")
    assert result.stop_reason == StopReason.MAX_TOOL_CALLS
    assert [r.content for m in result.messages for r in m.tool_results if not r.is_error] == ["1", "2"]


async def test_001_g_consecutive_tool_errors_stop_the_run_and_a_success_resets_them() -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("no")

    failing = action(type="tool_call", name="broken", arguments={})
    working = action(type="tool_call", name="add", arguments={"a": 1, "b": 1})
    stopped = await Agent(bob(failing, failing), tools=[broken, add], limits=Limits(max_consecutive_errors=2)).run("go")
    assert stopped.stop_reason == StopReason.CONSECUTIVE_ERRORS
    reset = bob(failing, working, failing, action(type="final", text="done"))
    finished = await Agent(reset, tools=[broken, add], limits=Limits(max_consecutive_errors=2)).run("go")
    assert finished.stop_reason == StopReason.COMPLETE


async def test_001_g_the_turn_timeout_bounds_the_whole_run() -> None:
    result = await Agent(ScriptedProvider([hang()]), limits=Limits(run_timeout=0.05, request_timeout=None)).run("go")
    assert result.stop_reason == StopReason.TIMEOUT
    assert "run_timeout" in result.detail


async def test_001_g_history_is_truncated_to_the_most_recent_messages_at_a_user_message() -> None:
    history = [Message.user(f"q{n}") if n % 2 == 0 else Message.assistant(f"a{n}") for n in range(60)]
    model = bob(action(type="final", text="ok"))
    await Agent(model, limits=Limits(max_history_messages=5)).run("last", history=history)
    sent = model.requests[0].messages
    assert len(sent) <= 5
    assert sent[0].role == "user"
    assert sent[-1].text == "last"


async def test_001_g_ask_user_ends_the_run_with_the_question() -> None:
    result = await Agent(bob(action(type="ask_user", question="Which numbers?")), tools=[add]).run("add")
    assert (result.stop_reason, result.text, result.degraded) == (StopReason.ASK_USER, "Which numbers?", False)


async def test_001_g_a_denied_tool_is_never_offered_nor_run() -> None:
    ran: list[str] = []

    @tool
    def bash(command: str) -> str:
        """Run a command."""
        ran.append(command)
        return ""

    model = bob(action(type="tool_call", name="bash", arguments={"command": "ls"}), action(type="final", text="no"))
    result = await Agent(model, tools=[bash, add], deny=["bash"]).run("list files")
    system = model.requests[0].system or ""
    assert "- add: Add two integers." in system
    assert "- bash:" not in system
    assert ran == []
    (refused,) = result.messages[2].tool_results
    assert refused.is_error


V1_AGENT_TOML = """\
[runtime]
default_model = "openai:gpt-4o-mini"
max_steps = 12
turn_timeout_ms = 90000

[llm]
retry_max = 2
stream_default = false

[policy]
deny_tools = []

[[mcp.servers]]
id = "filesystem"
transport = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
tool_timeout_ms = 15000
"""


def test_001_c_the_v1_agent_toml_is_read_as_written(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(V1_AGENT_TOML)
    config = load(tmp_path, {"HOME": str(tmp_path / "home")}).config
    assert config.runtime.model == "openai:gpt-4o-mini"
    assert (config.runtime.limits.max_turns, config.runtime.limits.run_timeout) == (12, 90.0)
    assert (config.runtime.retries, config.cli.stream, config.tools.deny) == (2, False, [])
    (server,) = config.mcp.servers
    assert (server.id, server.transport, server.command, server.tool_timeout) == ("filesystem", "stdio", "npx", 15.0)
    assert server.args == ["-y", "@modelcontextprotocol/server-filesystem", "."]


async def test_001_c_mcp_env_values_expand_variables_of_the_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BOB_TEST_TOKEN", "s3cret-value")
    server = py_server(env={"SEEN": "${BOB_TEST_TOKEN}"})
    async with MCPTools([server]) as mcp:
        get_env = mcp.get("get_env")
        assert get_env is not None
        assert await get_env.bind({"name": "SEEN"})() == "s3cret-value"
