"""A stdio MCP server that dies is started again on the next call; the call it took down is never repeated."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import alive, apoll, calls_seen, has_marker, logged, py_server, server_pids
from tether import Agent
from tether.errors import ToolError
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.tools.mcp import MCPTools

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


async def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    await apoll(lambda: not alive(pid), "the server to die")


async def test_after_the_server_dies_one_call_says_so_and_the_next_is_served_by_a_new_process() -> None:
    async with MCPTools([py_server()]) as mcp:
        first, guard = await server_pids(mcp)
        add = mcp.get("add")
        assert add is not None
        await kill(first)
        with pytest.raises(ToolError, match="'py' closed the connection; it is started again for the next call"):
            await add({"a": 1, "b": 2})
        assert await add({"a": 1, "b": 2}) == "3"
        second, _ = await server_pids(mcp)
        assert second != first
        await apoll(lambda: not alive(guard), "the dead server's guard to end")
    await apoll(lambda: not alive(second), "the new server to end with the block")


async def test_the_call_the_server_died_in_is_not_sent_again(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    async with MCPTools([py_server(log=log)]) as mcp:
        pid, _ = await server_pids(mcp)
        wait, echo = mcp.get("wait_for_release"), mcp.get("echo")
        assert wait is not None
        assert echo is not None
        waiting = asyncio.ensure_future(wait({}))
        await apoll(lambda: has_marker(log, "waiting"), "the call to reach the server")
        await kill(pid)
        with pytest.raises(ToolError, match="closed the connection"):
            await waiting
        assert await echo({"message": "still here"}) == "still here"
    assert [seen["name"] for seen in calls_seen(log) if seen["name"] != "pids"] == ["wait_for_release", "echo"]


async def test_concurrent_calls_after_a_death_share_one_restart(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    async with MCPTools([py_server(log=log)]) as mcp:
        pid, _ = await server_pids(mcp)
        echo = mcp.get("echo")
        assert echo is not None
        await kill(pid)
        with pytest.raises(ToolError):
            await echo({"message": "lost"})
        answers = await asyncio.gather(*(echo({"message": str(n)}) for n in range(5)))
        assert answers == [str(n) for n in range(5)]
    handshakes = [entry for entry in logged(log) if entry.get("method") == "server/discover"]
    assert len(handshakes) == 2, "the first start and one restart, not one per waiting call"


async def test_a_server_that_cannot_start_again_fails_the_call_and_is_tried_again_later(tmp_path: Path) -> None:
    once = tmp_path / "started"
    async with MCPTools([py_server(env={"MCP_TEST_ONCE": str(once)})]) as mcp:
        pid, _ = await server_pids(mcp)
        echo = mcp.get("echo")
        assert echo is not None
        await kill(pid)
        with pytest.raises(ToolError, match="closed the connection"):
            await echo({"message": "lost"})
        with pytest.raises(ToolError, match="'py' closed the connection and could not be started again"):
            await echo({"message": "refused"})
        once.unlink()
        assert await echo({"message": "back"}) == "back"


async def test_the_tool_list_of_the_new_process_replaces_the_old_one() -> None:
    async with MCPTools([py_server()]) as mcp:
        grow = mcp.get("grow")
        assert grow is not None
        generation = mcp.generation
        await grow({})
        generation = await mcp.changed(generation)
        assert mcp.get("fresh") is not None
        pid, _ = await server_pids(mcp)
        await kill(pid)
        with pytest.raises(ToolError):
            await grow({})
        assert await grow({}) == "grown", "the new process is served and grows its list again"
        # The restart listed the new process's tools ('fresh' gone), then grow added it back: two changes.
        await mcp.changed(generation + 1)
        assert mcp.get("fresh") is not None


async def test_an_agent_run_goes_on_after_the_server_died_between_its_calls(tmp_path: Path) -> None:
    async with MCPTools([py_server()]) as mcp:
        pid, _ = await server_pids(mcp)
        await kill(pid)
        script = [call("add", {"a": 2, "b": 2}), call("add", {"a": 2, "b": 2}), reply("four")]
        result = await Agent(ScriptedProvider(script), tools=mcp.tools).run("2+2?")
    results = [part for message in result.messages for part in message.parts if isinstance(part, ToolResult)]
    assert [(r.is_error, r.code) for r in results] == [(True, "tool_failed"), (False, None)], results
    assert results[1].content == "4"
    assert (result.stop_reason, result.text) == ("complete", "four")
