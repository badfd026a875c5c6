"""An MCP server's tool in durable runs: a real server (``tests/mcp/server.py`` over stdio), called as a step
of a run started directly and of a run taken from a queue by the same process."""

from __future__ import annotations

from pathlib import Path

from tests.mcp.conftest import calls_seen, py_server
from tether import Agent
from tether.durable import Queue
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.tools.mcp import MCPTools


async def test_an_mcp_tool_is_called_once_in_a_direct_and_in_a_queued_durable_run(tmp_path: Path) -> None:
    from tether.durable import DurableAgent, launch, shutdown

    log = tmp_path / "mcp.jsonl"
    script = [call("add", {"a": 2, "b": 3}), reply("5"), call("add", {"a": 40, "b": 2}), reply("42")]
    local = Queue("local-mcp")
    async with MCPTools([py_server(log=log)]) as mcp:
        durable = DurableAgent(Agent(ScriptedProvider(script), tools=mcp.tools), name="with-mcp")
        launch(tmp_path / "runs.sqlite", queues=[local])
        try:
            direct = await durable.run("2+3?", workflow_id="direct")
            queued = await (await durable.enqueue("40+2?", queue=local, workflow_id="queued")).result()
            again = await durable.run("2+3?", workflow_id="direct")
        finally:
            shutdown()
    assert (direct.text, queued.text, again.text) == ("5", "42", "5")
    assert [m.tool_results[0].content for m in direct.messages if m.tool_results] == ["5"]
    assert [m.tool_results[0].content for m in queued.messages if m.tool_results] == ["42"]
    added = [seen for seen in calls_seen(log) if seen["name"] == "add"]
    assert added == [{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "add", "arguments": {"a": 40, "b": 2}}]
