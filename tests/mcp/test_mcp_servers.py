"""MCPTools against our own MCP server (``server.py``): timeouts, list changes, clashes, env, HTTP, failures."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from tests.mcp.conftest import alive, apoll, calls_seen, has_marker, logged, py_server
from tether import Agent, Limits
from tether.errors import ConfigInvalid, TimeoutExceeded, ToolError, TransportError
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.tools.mcp import MCPServerConfig, MCPTools


def call_cancellations(log: Path) -> int:
    """How many ``notifications/cancelled`` the server received for tool calls (not for its listen stream)."""
    cancelled = [entry["params"] for entry in logged(log) if entry.get("method") == "notifications/cancelled"]
    return sum(not str(params.get("requestId")).startswith("listen") for params in cancelled)


def waits_received(log: Path) -> int:
    """How many ``wait_for_release`` calls the server received."""
    return sum(seen["name"] == "wait_for_release" for seen in calls_seen(log))


def results_of(messages: object) -> list[ToolResult]:
    return [result for message in messages for result in message.tool_results]  # type: ignore[attr-defined]


async def test_each_server_has_its_own_tool_timeout_which_overrides_the_limits_one(tmp_path: Path) -> None:
    quick_log = tmp_path / "quick.jsonl"
    servers = [py_server("quick", log=quick_log, tool_timeout=0.5, prefix=True), py_server("patient", prefix=True)]
    async with MCPTools(servers) as mcp:
        waits = [mcp.get(f"{server}__wait_for_release") for server in ("quick", "patient")]
        assert [wait.timeout if wait else None for wait in waits] == [0.5, 300.0]
        model = ScriptedProvider(
            [parallel(call("quick__wait_for_release"), call("patient__wait_for_release")), reply("done")]
        )
        agent = Agent(model, tools=mcp.tools, limits=Limits(tool_timeout=0.5), concurrent_tools=True)
        run = agent.start("wait")
        # The quick server's call is cut at its 0.5 s and cancelled on the server; the patient one, started with
        # it, has therefore waited longer than Limits.tool_timeout: it is only now released. (A loaded machine
        # may reach the deadline before the call is even written: then the quick server never sees it.)
        started = time.monotonic()
        await apoll(
            lambda: (
                call_cancellations(quick_log) == 1 or (not waits_received(quick_log) and time.monotonic() > started + 2)
            ),
            "the quick call's cancellation",
        )
        release = mcp.get("patient__release")
        assert release is not None
        await release({})
        result = await run
        # Every call the quick server received was cancelled on it (the cancel follows the call on the same pipe,
        # written before the call was answered).
        received = waits_received(quick_log)
        assert received <= 1
        await apoll(lambda: call_cancellations(quick_log) == received, "the quick call's cancellation")
        if has_marker(quick_log, "waiting"):
            # The handler had started (a slow machine may cancel it before it does): it is interrupted.
            await apoll(lambda: has_marker(quick_log, "wait cancelled"), "the quick handler's interruption")
    quick, patient = results_of(result.messages)
    assert (quick.is_error, quick.code) == (True, "tool_timeout")
    assert (patient.is_error, patient.content) == (False, "released")


@pytest.mark.parametrize("legacy", [False, True], ids=["2026-subscriptions", "2025-notifications"])
async def test_the_tool_list_follows_the_servers_list_changed(legacy: bool, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    async with MCPTools([py_server(legacy=legacy, log=log)]) as mcp:
        before = {tool.name: tool for tool in mcp.tools}
        assert "fresh" not in before
        generation = mcp.generation
        grow = mcp.get("grow")
        assert grow is not None
        await grow({})
        await mcp.changed(generation)
        after = {tool.name: tool for tool in mcp.tools}
        assert set(after) == {*before, "fresh"}
        assert all(after[name] is before[name] for name in before), "unchanged tools are not rebuilt"
        fresh = mcp.get("fresh")
        assert fresh is not None
        assert await fresh({}) == "fresh"
    methods = [entry.get("method") for entry in logged(log)]
    assert ("initialize" in methods) is legacy, "the era this case is about"
    assert ("subscriptions/listen" in methods) is not legacy


async def test_name_clashes_between_servers_are_resolved_with_the_server_id() -> None:
    async with MCPTools([py_server("one"), py_server("two")]) as mcp:
        names = [tool.name for tool in mcp.tools]
        assert "one__add" in names
        assert "two__add" in names
        assert "add" not in names
        one_add, two_add = mcp.get("one__add"), mcp.get("two__add")
        assert one_add is not None
        assert two_add is not None
        assert await one_add({"a": 1, "b": 1}) == "2"
        assert await two_add({"a": 2, "b": 2}) == "4"


async def test_env_values_expand_variables_of_the_host_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_TEST_TOKEN", "s3cret")
    server = py_server(env={"API_TOKEN": "Bearer ${TETHER_TEST_TOKEN}!"})
    async with MCPTools([server]) as mcp:
        get_env = mcp.get("get_env")
        assert get_env is not None
        assert await get_env({"name": "API_TOKEN"}) == "Bearer s3cret!"
        assert await get_env({"name": "TETHER_TEST_TOKEN"}) == "<unset>", "the host's environment is not passed"


async def test_a_missing_variable_is_a_config_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_TEST_MISSING", raising=False)
    server = py_server(env={"TOKEN": "${TETHER_TEST_MISSING}"})
    with pytest.raises(ConfigInvalid, match=r"env 'TOKEN' uses \$\{TETHER_TEST_MISSING\}, but .* is not set"):
        async with MCPTools([server]):
            pass


async def test_streamable_http_lists_calls_and_sends_the_headers(
    http_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, log = http_server
    monkeypatch.setenv("TETHER_TEST_TOKEN", "s3cret")
    config = MCPServerConfig("web", transport="http", url=url, headers={"Authorization": "Bearer ${TETHER_TEST_TOKEN}"})
    async with MCPTools([config]) as mcp:
        add, header = mcp.get("add"), mcp.get("header")
        assert add is not None
        assert header is not None
        assert add.parameters["properties"]["b"]["type"] == "integer"
        assert await add({"a": 20, "b": 22}) == "42"
        assert await header({"name": "Authorization"}) == "Bearer s3cret"
    assert {"name": "add", "arguments": {"a": 20, "b": 22}} in calls_seen(log)


async def test_streamable_http_follows_list_changes(http_server: tuple[str, Path]) -> None:
    url, _ = http_server
    async with MCPTools([MCPServerConfig("web", transport="http", url=url)]) as mcp:
        generation = mcp.generation
        grow = mcp.get("grow")
        assert grow is not None
        await grow({})
        await mcp.changed(generation)
        assert mcp.get("fresh") is not None


async def test_a_tool_called_after_the_block_answers_tool_failed() -> None:
    async with MCPTools([py_server()]) as mcp:
        add = mcp.get("add")
    assert add is not None
    assert mcp.tools == []
    with pytest.raises(ToolError, match="'py' is not connected"):
        await add({"a": 1, "b": 1})


async def test_a_server_that_cannot_start_fails_the_block_and_the_others_are_closed(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    broken = MCPServerConfig("broken", command="tether-no-such-command")
    with pytest.raises(ConfigInvalid, match="'tether-no-such-command' was not found"):
        async with MCPTools([py_server(log=log), broken]):
            pass
    crashing = MCPServerConfig("crashing", command=sys.executable, args=["-c", "pass"])
    with pytest.raises(TransportError, match=r"MCP server 'crashing' \(.*\) could not be reached") as caught:
        async with MCPTools([crashing]):
            pass
    assert caught.value.code == "transport"


async def test_an_http_server_that_is_not_there_fails_the_block_with_a_transport_error() -> None:
    config = MCPServerConfig("down", transport="http", url="http://127.0.0.1:9/mcp")
    with pytest.raises(TransportError, match=r"MCP server 'down' \(http://127.0.0.1:9/mcp\) could not be reached"):
        async with MCPTools([config]):
            pass


async def test_a_server_that_never_answers_is_given_up_after_connect_timeout_and_stopped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    silent = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(3600)"
    config = MCPServerConfig("silent", command=sys.executable, args=["-c", silent, str(pid_file)], connect_timeout=0.5)
    with pytest.raises(TimeoutExceeded, match=r"'silent' did not answer within 0\.5 s"):
        async with MCPTools([config]):
            pass
    assert not alive(int(pid_file.read_text())), "the silent server was stopped"


@pytest.mark.parametrize("yields", [0, 1, 2])
async def test_a_call_cancelled_twice_is_still_cancelled_on_the_server(yields: int, tmp_path: Path) -> None:
    """Two deadlines (the loop's and the server's own) may cancel one call one after the other: the second must
    not cut short the message that tells the server to stop."""
    log = tmp_path / "log.jsonl"
    async with MCPTools([py_server(log=log)]) as mcp:
        wait = mcp.get("wait_for_release")
        assert wait is not None
        task = asyncio.ensure_future(wait({}))
        await apoll(lambda: has_marker(log, "waiting"), "the call")
        task.cancel()
        for _ in range(yields):  # the first cancellation is being unwound
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await apoll(lambda: call_cancellations(log) == 1, "the call's cancellation")
        await apoll(lambda: has_marker(log, "wait cancelled"), "the handler's interruption")
