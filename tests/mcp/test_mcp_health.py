"""Agent.health() with real MCP servers: one check per server of the agent's tools, a real tools/list each time,
a server that died reported (and started again by the next call, not by the check), a closed block reported."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import alive, apoll, logged, py_server, server_pids
from tether import Agent
from tether.providers.scripted import ScriptedProvider
from tether.tools.mcp import MCPTools

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def lists(log: Path) -> int:
    return sum(1 for entry in logged(log) if entry.get("method") == "tools/list")


async def test_each_server_of_the_agents_tools_is_checked_once_by_a_real_tools_list(tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    async with MCPTools([py_server("one", log=first), py_server("two", log=second, prefix=True)]) as mcp:
        agent = Agent(ScriptedProvider([]), tools=mcp.tools)
        # Each server is listed twice on its own: once when connected, once more when its change subscription
        # is acknowledged. The check's listing comes after those.
        await apoll(lambda: lists(first) == lists(second) == 2, "both servers' own listings")
        before = lists(first), lists(second)
        report = await agent.health(timeout=30)
        after = lists(first), lists(second)
        count = len([tool for tool in mcp.tools if tool.server is not None and tool.server.name == "one"])

    assert [check.name for check in report.checks] == ["provider", "mcp:one", "mcp:two", "store"]
    one = report.get("mcp:one")
    assert one is not None
    assert one.status == "ok"
    assert one.detail == f"{count} tools listed"
    assert after == (before[0] + 1, before[1] + 1)
    assert report.ok


async def test_a_server_that_died_fails_transport_and_the_next_call_starts_it_again() -> None:
    async with MCPTools([py_server()]) as mcp:
        pid, _ = await server_pids(mcp)
        agent = Agent(ScriptedProvider([]), tools=mcp.tools)
        os.kill(pid, signal.SIGKILL)
        await apoll(lambda: not alive(pid), "the server to die")

        report = await agent.health(timeout=30)
        check = report.get("mcp:py")
        assert check is not None
        assert check.status == "failed", check
        assert check.code == "transport"
        assert "'py'" in check.detail
        assert not alive(pid)

        echo = mcp.get("echo")
        assert echo is not None
        assert await echo({"message": "back"}) == "back"
        again = await agent.health(timeout=30)
        assert again.get("mcp:py") is not None
        assert again.ok


async def test_a_server_whose_block_was_left_is_reported_closed() -> None:
    async with MCPTools([py_server()]) as mcp:
        agent = Agent(ScriptedProvider([]), tools=mcp.tools)

    report = await agent.health(timeout=30)

    check = report.get("mcp:py")
    assert check is not None
    assert check.status == "failed"
    assert check.code == "transport"
    assert "its MCPTools block was left" in check.detail
