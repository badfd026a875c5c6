"""Modes, the deny list and the permission hook (tools/permissions.py), through real runs."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import assert_valid, describe, run_events
from tether import Agent, tool
from tether.errors import ConfigInvalid
from tether.messages import ToolCall
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.tools.permissions import Allow, Ask, Deny, Mode

done: list[str] = []


@tool(read_only=True)
def look(path: str) -> str:
    """Read something."""
    done.append(f"look {path}")
    return f"contents of {path}"


@tool
def change(path: str) -> str:
    """Change something."""
    done.append(f"change {path}")
    return "changed"


@pytest.fixture(autouse=True)
def _clear() -> None:
    done.clear()


async def test_read_only_mode_offers_only_read_only_tools_and_refuses_the_others() -> None:
    model = ScriptedProvider([parallel(call("look", {"path": "a"}), call("change", {"path": "a"})), reply("ok")])
    result = await Agent(model, tools=[look, change], mode="read-only").run("go")
    assert [t.name for t in model.requests[0].tools] == ["look"]
    looked, refused = result.messages[2].tool_results
    assert looked.content == "contents of a"
    assert refused.code == "permission_denied"
    assert "read-only mode" in refused.content
    assert done == ["look a"]


async def test_the_mode_can_change_between_runs() -> None:
    agent = Agent(ScriptedProvider([reply("x"), reply("y")]), tools=[look, change], mode=Mode.READ_ONLY)
    await agent.run("one")
    agent.mode = "full"
    await agent.run("two")
    assert agent.mode is Mode.FULL
    model = agent.provider
    assert isinstance(model, ScriptedProvider)
    assert [len(r.tools) for r in model.requests] == [1, 2]


async def test_denied_tools_are_never_offered_nor_run() -> None:
    model = ScriptedProvider([call("change", {"path": "x"}), reply("ok")])
    result = await Agent(model, tools=[look, change], deny=["change"]).run("go")
    assert [t.name for t in model.requests[0].tools] == ["look"]
    assert result.messages[2].tool_results[0].code == "permission_denied"
    assert done == []


def test_an_unknown_mode_or_denied_name_is_a_config_error() -> None:
    with pytest.raises(ConfigInvalid, match="read-only"):
        Agent(ScriptedProvider([]), tools=[look], mode="readonly")
    with pytest.raises(ConfigInvalid, match="nope"):
        Agent(ScriptedProvider([]), tools=[look], deny=["nope"])


async def test_the_hook_decides_each_parallel_call_on_its_own() -> None:
    asked: list[str] = []

    def hook(tool_call: ToolCall) -> Allow | Deny:
        asked.append(str(tool_call.arguments))
        return Deny("not that file") if tool_call.arguments == {"path": "secret"} else Allow()

    model = ScriptedProvider(
        [
            parallel(call("look", {"path": "a"}), call("look", {"path": "secret"}), call("look", {"path": "b"})),
            reply("k"),
        ]
    )
    events = await run_events(Agent(model, tools=[look], can_use_tool=hook), "go")
    assert asked == ["{'path': 'a'}", "{'path': 'secret'}", "{'path': 'b'}"]
    assert done == ["look a", "look b"]
    results = [describe(e) for e in events if describe(e).startswith("ToolResult")]
    assert results == [
        "ToolResult(look -> contents of a)",
        "ToolResult(look -> error:permission_denied)",
        "ToolResult(look -> contents of b)",
    ]


@pytest.mark.parametrize("approves", [True, False])
async def test_ask_pauses_for_the_host_who_approves_or_not(approves: bool) -> None:
    questions: list[tuple[str, str]] = []

    async def approve(tool_call: ToolCall, reason: str) -> bool:
        questions.append((tool_call.name, reason))
        return approves

    model = ScriptedProvider([call("change", {"path": "x"}), reply("ok")])
    agent = Agent(model, tools=[change], can_use_tool=lambda c: Ask("it writes"), approve=approve)
    result = await agent.run("go")
    assert questions == [("change", "it writes")]
    assert done == (["change x"] if approves else [])
    outcome = result.messages[2].tool_results[0]
    assert outcome.is_error is not approves
    if not approves:
        assert "did not approve" in outcome.content


async def test_ask_without_anyone_to_approve_pauses_the_run_with_the_call_pending() -> None:
    model = ScriptedProvider([call("change", {"path": "x"}, id="c1"), reply("ok")])
    result = await Agent(model, tools=[change], can_use_tool=lambda c: Ask("it writes")).run("go")
    assert result.stop_reason == "paused"
    assert not result.degraded
    assert [(p.id, p.tool, p.kind, p.reason) for p in result.pending] == [("c1", "change", "approval", "it writes")]
    assert result.messages[-1].tool_calls[0].id == "c1"  # the call stays open: no result was written
    assert result.state is not None
    assert len(model.requests) == 1
    assert done == []


async def test_a_run_waiting_for_approval_can_be_cancelled() -> None:
    waiting = asyncio.Event()

    async def approve(tool_call: ToolCall, reason: str) -> bool:
        waiting.set()
        await asyncio.Event().wait()
        return True

    model = ScriptedProvider([call("change", {"path": "x"})])
    handle = Agent(model, tools=[change], can_use_tool=lambda c: Ask(), approve=approve).start("go")
    await waiting.wait()
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert result.messages[-1].tool_results[0].code == "cancelled"
    assert done == []
    assert_valid(result)
