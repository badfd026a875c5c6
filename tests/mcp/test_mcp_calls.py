"""Listing and calling our own MCP server (``server.py``) over stdio; one server for the whole module.

These tests only read from the server, so they share it (starting a Python MCP server costs about a
second); each looks only at the calls it made itself in the server's request log.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.helpers import assert_valid
from tests.mcp.conftest import calls_seen, py_server
from tether import Agent
from tether.errors import InvalidArguments
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.tools.mcp import MCPTools

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[MCPTools, Path]]:
    """Our server, connected: (the tools, the server's request log)."""
    log = tmp_path_factory.mktemp("mcp") / "log.jsonl"
    async with MCPTools([py_server(log=log)]) as mcp:
        yield mcp, log


def results_of(messages: object) -> list[ToolResult]:
    return [result for message in messages for result in message.tool_results]  # type: ignore[attr-defined]


async def test_each_remote_tool_becomes_a_tool_with_the_servers_schema_and_description(
    served: tuple[MCPTools, Path],
) -> None:
    tools = {tool.name: tool for tool in served[0].tools}
    assert {"add", "echo", "get_env", "pids", "fail", "wait_for_release", "grow"} <= set(tools)
    add = tools["add"]
    assert add.description == "Add two integers."
    assert add.parameters["properties"].keys() == {"a", "b"}
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert sorted(add.parameters["required"]) == ["a", "b"]
    assert add.is_async


async def test_a_valid_call_reaches_the_server_and_its_answer_comes_back_as_text(
    served: tuple[MCPTools, Path],
) -> None:
    mcp, log = served
    tool = mcp.get("add")
    assert tool is not None
    assert await tool.bind({"a": 1000, "b": 3})() == "1003"
    assert {"name": "add", "arguments": {"a": 1000, "b": 3}} in calls_seen(log)


async def test_invalid_arguments_are_refused_by_our_validator_and_never_reach_the_server(
    served: tuple[MCPTools, Path],
) -> None:
    mcp, log = served
    tool = mcp.get("add")
    assert tool is not None
    with pytest.raises(InvalidArguments, match="a: 'two' is not of type 'integer'"):
        tool.bind({"a": "two", "b": 3})
    model = ScriptedProvider([call("add", {"a": "two", "b": 3}), call("add", {"a": 2000, "b": 3}), reply("5")])
    result = await Agent(model, tools=mcp.tools).run("2+3?")
    first, second = results_of(result.messages)
    assert (first.is_error, first.code) == (True, "invalid_arguments")
    assert "'two' is not of type 'integer'" in first.content
    assert (second.is_error, second.content) == (False, "2003")
    sent = [seen["arguments"] for seen in calls_seen(log) if seen["name"] == "add"]
    assert {"a": 2000, "b": 3} in sent
    assert {"a": "two", "b": 3} not in sent, "the invalid call never reached the server"


async def test_an_is_error_result_is_a_tool_failed_result_carrying_the_servers_text(
    served: tuple[MCPTools, Path],
) -> None:
    model = ScriptedProvider([call("fail", {"message": "the disk is full"}), reply("sorry")])
    result = await Agent(model, tools=served[0].tools).run("go")
    (failed,) = results_of(result.messages)
    assert (failed.is_error, failed.code) == (True, "tool_failed")
    assert "the disk is full" in failed.content
    assert result.text == "sorry"


async def test_structured_content_without_text_is_given_to_the_model_as_json(served: tuple[MCPTools, Path]) -> None:
    forecast = served[0].get("forecast")
    assert forecast is not None
    assert json.loads(await forecast({})) == {"city": "Oslo", "celsius": -3}


async def test_a_server_that_restates_its_structured_content_as_text_is_not_read_twice(
    served: tuple[MCPTools, Path],
) -> None:
    pids = served[0].get("pids")
    assert pids is not None
    assert json.loads(await pids({})).keys() == {"pid", "ppid"}


async def test_a_name_tether_cannot_use_is_sanitized_and_the_server_still_gets_the_original(
    served: tuple[MCPTools, Path],
) -> None:
    mcp, log = served
    get_env = mcp.get("get_env")
    assert get_env is not None
    await get_env({"name": "TETHER_SANITIZED_NAME_PROBE"})
    assert {"name": "get.env", "arguments": {"name": "TETHER_SANITIZED_NAME_PROBE"}} in calls_seen(log)


async def test_an_agent_runs_an_mcp_tool_beside_its_own(served: tuple[MCPTools, Path]) -> None:
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), call("double", {"n": 5}), reply("5 and 10")])
    result = await Agent(model, tools=[double, *served[0].tools]).run("2+3, and twice 5?")
    offered = {tool.name: tool for tool in model.requests[0].tools}
    assert {"add", "double"} <= set(offered)
    assert offered["add"].parameters["required"] == ["a", "b"]
    assert [(r.name, r.content) for r in results_of(result.messages)] == [("add", "5"), ("double", "10")]
    assert result.text == "5 and 10"
    assert result.stop_reason == "complete"
    assert_valid(result)
