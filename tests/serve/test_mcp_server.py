"""``tether mcp serve`` as an MCP client sees it: the real command in a subprocess, spoken to by the MCP SDK's
own client over stdio and over streamable HTTP, serving the scripted agents of ``tests/serve/mcp_agents.py``.

Each test names what a client relies on: the one tool and its schemas, the answer (text, or structured for a
typed agent), progress while a run goes on, a cancelled call cancelling its run (its session's transcript
valid, the server serving the next call), failures as error results, secrets masked, sessions continued, and
the HTTP mode's token and host rules.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Generator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.serve.mcp_agents import SECRET, answer, slow
from tether import Agent, RunResult, StopReason
from tether.errors import ConfigInvalid
from tether.messages import transcript_problems
from tether.providers import ScriptedProvider
from tether.serve import MCPAgentServer
from tether.sessions import SQLiteSessionStore

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
POLL_SECONDS = 20.0
"""The bound on every wait: generous, since each ends as soon as its condition holds."""


@dataclass
class Place:
    """Where a served agent keeps its files: its tool's markers, its sessions, the command's stderr."""

    root: Path

    @property
    def marks(self) -> Path:
        return self.root / "marks.txt"

    @property
    def store(self) -> Path:
        return self.root / "sessions.db"

    @property
    def stderr(self) -> Path:
        return self.root / "stderr.txt"

    def env(self) -> dict[str, str]:
        kept = {k: v for k, v in os.environ.items() if not k.startswith(("TETHER_", "PYTEST_"))}
        return {
            **kept,
            "PYTHONPATH": f"{SRC}{os.pathsep}{ROOT}",
            "HOME": str(self.root / "home"),
            "XDG_CONFIG_HOME": str(self.root / "config"),
            "XDG_DATA_HOME": str(self.root / "data"),
            "XDG_STATE_HOME": str(self.root / "state"),
            "XDG_CACHE_HOME": str(self.root / "cache"),
            "TETHER_LOCAL_SERVERS": "off",
            "MCP_AGENT_LOG": str(self.marks),
            "MCP_AGENT_STORE": str(self.store),
        }

    def marked(self) -> list[str]:
        return self.marks.read_text().splitlines() if self.marks.exists() else []


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return Place(tmp_path)


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tether", "mcp", "serve", *args]


@asynccontextmanager
async def over_stdio(place: Place, agent: str = "agent", *args: str) -> AsyncIterator[ClientSession]:
    """A client session with ``tether mcp serve --agent tests.serve.mcp_agents:AGENT`` over stdio."""
    argv = command("--agent", f"tests.serve.mcp_agents:{agent}", *args)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=place.env(), cwd=str(ROOT))
    with place.stderr.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.fixture
def http_server(place: Place) -> Iterator[str]:
    """``tether mcp serve --http --port 0`` in a subprocess; its endpoint's URL, read from its stderr."""
    yield from _http_server(place)


def _http_server(place: Place, *args: str) -> Generator[str, None, None]:
    argv = command("--agent", "tests.serve.mcp_agents:agent", "--http", "--port", "0", *args)
    with place.stderr.open("w") as errlog:
        process = subprocess.Popen(argv, cwd=ROOT, env=place.env(), stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        yield _served_url(place, process)
    finally:
        process.terminate()
        assert process.wait(timeout=POLL_SECONDS) == 0, place.stderr.read_text()


def _served_url(place: Place, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + POLL_SECONDS
    while time.monotonic() < deadline:
        found = re.search(r"at (http://\S+/mcp)", place.stderr.read_text())
        if found:
            return found[1]
        assert process.poll() is None, f"the server exited: {place.stderr.read_text()}"
        time.sleep(0.05)
    raise AssertionError(f"the server never said where it listens: {place.stderr.read_text()}")


@asynccontextmanager
async def over_http(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=POLL_SECONDS) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def until(condition: Any, what: str) -> None:
    with anyio.fail_after(POLL_SECONDS):
        while not condition():  # noqa: ASYNC110 - a file or a list filled elsewhere: polled
            await anyio.sleep(0.02)


# --- stdio ----------------------------------------------------------------------------------------------------


async def test_the_agent_is_one_tool_named_after_it_taking_a_prompt_and_a_session(place: Place) -> None:
    async with over_stdio(place) as session:
        listed = await session.list_tools()
    [tool] = listed.tools
    assert tool.name == "helper_bot"  # the agent's name "helper bot", made fit for MCP
    assert tool.input_schema["required"] == ["prompt"]
    assert set(tool.input_schema["properties"]) == {"prompt", "session_id"}
    assert tool.input_schema["properties"]["prompt"]["type"] == "string"
    assert tool.output_schema is None  # a text agent: no structured output
    assert tool.description


async def test_name_renames_the_tool(place: Place) -> None:
    async with over_stdio(place, "agent", "--name", "ask_helper") as session:
        [tool] = (await session.list_tools()).tools
        result = await session.call_tool("ask_helper", {"prompt": "hello"})
    assert tool.name == "ask_helper"
    assert text_of(result) == "echo: hello"


async def test_a_call_runs_the_agent_and_answers_with_its_text(place: Place) -> None:
    async with over_stdio(place) as session:
        result = await session.call_tool("helper_bot", {"prompt": "add"})
    assert not result.is_error
    assert text_of(result) == "the tool said 5"  # the agent called its add tool, then answered
    assert re.search(r"run \S+: complete after 2 turns", place.stderr.read_text())


async def test_a_typed_agent_answers_with_structured_content_its_output_schema_describes(place: Place) -> None:
    async with over_stdio(place, "typed") as session:
        [tool] = (await session.list_tools()).tools
        result = await session.call_tool("weather", {"prompt": "Oslo?"})
        leaked = await session.call_tool("weather", {"prompt": "leak"})
    assert tool.output_schema is not None
    assert tool.output_schema["type"] == "object"
    assert set(tool.output_schema["properties"]) == {"city", "celsius"}
    assert not result.is_error
    assert result.structured_content == {"city": "Oslo", "celsius": -3}
    assert leaked.structured_content == {"city": "***", "celsius": -3}  # known keys masked in the output too
    assert SECRET not in text_of(leaked)


async def test_a_typed_output_whose_schema_is_not_an_object_is_given_as_its_result(place: Place) -> None:
    async with over_stdio(place, "listed") as session:
        [tool] = (await session.list_tools()).tools
        result = await session.call_tool("tags", {"prompt": "colours?"})
    assert tool.output_schema is not None
    assert tool.output_schema["type"] == "object"
    assert tool.output_schema["properties"]["result"]["type"] == "array"
    assert result.structured_content == {"result": ["red", "green"]}


async def test_progress_is_notified_per_turn_and_per_tool_call_while_the_run_goes_on(place: Place) -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with over_stdio(place) as session:
        result = await session.call_tool("helper_bot", {"prompt": "add"}, progress_callback=progress)
        await until(lambda: len(seen) >= 4, "the progress notifications")  # each is handled in a task of its own
    assert text_of(result) == "the tool said 5"
    assert sorted(message or "" for _, message in seen) == sorted(
        ["turn 1", "tool add started", "tool add done", "turn 2"]
    )
    assert sorted(value for value, _ in seen) == [1, 2, 3, 4]  # one count, growing


async def test_a_cancelled_call_cancels_its_run_and_the_server_serves_the_next_call(place: Place) -> None:
    async with over_stdio(place) as session:
        async with anyio.create_task_group() as group:
            group.start_soon(session.call_tool, "helper_bot", {"prompt": "slow", "session_id": "s1"})
            await until(lambda: "started" in place.marked(), "the slow tool to start")
            group.cancel_scope.cancel()  # the client gives up on the call: notifications/cancelled
        await until(lambda: "cancelled" in place.marked(), "the slow tool to be cancelled")
        await until(lambda: ": cancelled after" in place.stderr.read_text(), "the run to end cancelled")
        after = await session.call_tool("helper_bot", {"prompt": "add"})
    assert text_of(after) == "the tool said 5"
    stored = await SQLiteSessionStore(place.store).load("s1")
    assert transcript_problems(stored.messages) == []  # the slow call has its (synthetic) result
    [call_result] = [r for m in stored.messages for r in m.tool_results]
    assert call_result.name == "slow"
    assert call_result.is_error


async def test_a_run_that_fails_is_an_error_result_with_its_stop_reason(place: Place) -> None:
    async with over_stdio(place) as session:
        result = await session.call_tool("helper_bot", {"prompt": "fail"})
    assert result.is_error
    assert "the run stopped: error" in text_of(result)
    assert "the model's server is down" in text_of(result)


async def test_bad_arguments_are_an_error_result_naming_them_and_another_tool_a_protocol_error(place: Place) -> None:
    async with over_stdio(place) as session:
        result = await session.call_tool("helper_bot", {"prompt": "  "})
        with pytest.raises(MCPError, match="Unknown tool: nope"):
            await session.call_tool("nope", {"prompt": "hi"})
    assert result.is_error
    assert text_of(result).startswith("[invalid_arguments]")
    assert "prompt" in text_of(result)


async def test_known_secrets_never_reach_the_client(place: Place) -> None:
    async with over_stdio(place) as session:
        result = await session.call_tool("helper_bot", {"prompt": "leak"})
    assert SECRET not in text_of(result)
    assert text_of(result) == "the key is ***"


async def test_a_session_id_continues_the_conversation(place: Place) -> None:
    async with over_stdio(place) as session:
        await session.call_tool("helper_bot", {"prompt": "hello", "session_id": "talk"})
        second = await session.call_tool("helper_bot", {"prompt": "count", "session_id": "talk"})
        alone = await session.call_tool("helper_bot", {"prompt": "count"})
    assert text_of(second) == "you asked 2 times"
    assert text_of(alone) == "you asked 1 times"


async def test_without_agent_the_configured_agent_is_served_as_the_tool_agent(place: Place) -> None:
    project = place.root / "project"
    project.mkdir()
    (project / "agent.toml").write_text('[runtime]\nmodel = "scripted:echo"\n')
    argv = command()
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=place.env(), cwd=str(project))
    with place.stderr.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            [tool] = (await session.list_tools()).tools
            result = await session.call_tool("agent", {"prompt": "from the configuration"})
    assert tool.name == "agent"
    assert text_of(result) == "from the configuration"


def test_an_agent_that_cannot_be_imported_is_a_configuration_problem(place: Place) -> None:
    done = subprocess.run(
        command("--agent", "tests.serve.mcp_agents:nowhere"),
        cwd=ROOT, env=place.env(), capture_output=True, text=True, timeout=POLL_SECONDS, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 1
    assert "has no attribute 'nowhere'" in done.stderr
    assert done.stdout == ""  # stdout is the protocol's


# --- streamable HTTP ------------------------------------------------------------------------------------------


async def test_over_http_the_tool_is_listed_and_answers(http_server: str) -> None:
    assert http_server.startswith("http://127.0.0.1:")
    async with over_http(http_server) as session:
        [tool] = (await session.list_tools()).tools
        result = await session.call_tool("helper_bot", {"prompt": "add"})
    assert tool.name == "helper_bot"
    assert text_of(result) == "the tool said 5"


async def test_over_http_progress_and_cancellation_work_as_over_stdio(place: Place, http_server: str) -> None:
    seen: list[str | None] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with over_http(http_server) as session:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: session.call_tool("helper_bot", {"prompt": "slow"}, progress_callback=progress))
            await until(lambda: "started" in place.marked(), "the slow tool to start")
            await until(lambda: "tool slow started" in seen, "its progress")
            group.cancel_scope.cancel()
        await until(lambda: "cancelled" in place.marked(), "the slow tool to be cancelled")
        after = await session.call_tool("helper_bot", {"prompt": "hello"})
    assert text_of(after) == "echo: hello"


def test_over_http_a_token_is_required_when_given(place: Place) -> None:
    servers = _http_server(place, "--token", "a-long-random-token")
    url = next(servers)
    try:
        refused = httpx2.post(url, json={}, headers={"Accept": "application/json, text/event-stream"})
        wrong = httpx2.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert refused.status_code == 401
        assert wrong.status_code == 401

        async def listed() -> list[str]:
            async with over_http(url, token="a-long-random-token") as session:
                return [tool.name for tool in (await session.list_tools()).tools]

        assert anyio.run(listed) == ["helper_bot"]
    finally:
        servers.close()


def test_over_http_another_host_than_a_loopback_one_needs_a_token(place: Place) -> None:
    done = subprocess.run(
        command("--agent", "tests.serve.mcp_agents:agent", "--http", "--host", "0.0.0.0"),
        cwd=ROOT, env=place.env(), capture_output=True, text=True, timeout=POLL_SECONDS, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "refusing to serve on 0.0.0.0 without a token" in done.stderr


def test_host_and_port_without_http_are_a_usage_error(place: Place) -> None:
    done = subprocess.run(
        command("--port", "9000"), cwd=ROOT, env=place.env(), capture_output=True, text=True,
        timeout=POLL_SECONDS, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--port only apply with --http" in done.stderr


# --- in this process: an agent without a session store -------------------------------------------------------


def storeless() -> Agent[None, str]:
    return Agent(ScriptedProvider([answer], repeat_last=True), name="helper", tools=[slow])


async def test_without_a_store_a_session_is_kept_in_the_servers_memory() -> None:
    server = MCPAgentServer(storeless())
    await server.run("hello", "talk")
    second = await server.run("count", "talk")
    other = await server.run("count", "another")
    assert second.text == "you asked 2 times"
    assert other.text == "you asked 1 times"


async def test_a_cancelled_run_without_a_store_leaves_a_valid_history_the_next_call_continues(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_AGENT_LOG", str(place.marks))
    ended: list[RunResult[Any]] = []
    server = MCPAgentServer(storeless(), on_run_end=ended.append)
    call = asyncio.get_running_loop().create_task(server.run("slow", "talk"))
    await until(lambda: "started" in place.marked(), "the slow tool to start")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert [result.stop_reason for result in ended] == [StopReason.CANCELLED]
    assert transcript_problems(ended[0].messages) == []
    after = await server.run("count", "talk")
    assert after.text == "you asked 2 times"  # the cancelled call's prompt is in the conversation
    assert "cancelled" in place.marked()


def test_an_agent_that_needs_deps_or_a_bad_name_is_refused() -> None:
    with pytest.raises(ConfigInvalid, match="deps"):
        MCPAgentServer(Agent(ScriptedProvider.echo(), deps_type=dict))
    with pytest.raises(ConfigInvalid, match="tool's name"):
        MCPAgentServer(storeless(), name="two words")
