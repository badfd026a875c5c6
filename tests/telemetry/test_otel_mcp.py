"""An MCP tool call's client span (MCP conventions) nests under its execute_tool span."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.trace import SpanKind, StatusCode

from tests.mcp.conftest import py_server
from tests.telemetry.conftest import Otel, attrs, check_tree, parent_of
from tether import Agent
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.tools.mcp import MCPTools


async def test_an_mcp_call_is_a_client_span_under_the_tool_span(otel: Otel, tmp_path: Path) -> None:
    async with MCPTools([py_server(log=tmp_path / "log.jsonl")]) as mcp:
        names = {tool.name for tool in mcp.tools}
        assert {"add", "fail"} <= names
        model = ScriptedProvider([call("add", {"a": 2, "b": 3}, id="m1"), call("fail", {"message": "no"}, id="m2"),
                                  reply("done")])  # fmt: skip
        agent = Agent(model, tools=mcp.tools, telemetry=otel.telemetry())
        result = await agent.run("go")
    assert result.stop_reason == "complete"
    spans = otel.spans()
    check_tree(spans)
    [added] = otel.named("tools/call add")
    [tool_span] = otel.named("execute_tool add")
    assert parent_of(added, spans) is tool_span
    assert added.kind is SpanKind.CLIENT
    assert attrs(added)["mcp.method.name"] == "tools/call"
    assert attrs(added)["gen_ai.tool.name"] == "add"
    assert attrs(added)["gen_ai.operation.name"] == "execute_tool"
    assert attrs(added)["network.transport"] == "pipe"
    assert attrs(added)["mcp.protocol.version"]
    assert added.status.status_code is StatusCode.UNSET
    [failed] = otel.named("tools/call fail")
    assert parent_of(failed, spans) is otel.named("execute_tool fail")[0]
    assert attrs(failed)["error.type"] == "tool_error", "a result with isError is the conventions' tool_error"
    assert failed.status.status_code is StatusCode.ERROR
