"""tool_choice on an agent and on a run (loop/choice.py): checked before the run, kept by every request of
it ("none" for the whole run; "required" and a forced tool until the model has called one), natively and in
JSON action mode, and over real HTTP on servers that honour only some choices."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.mock_llm import Call, MockLLM, Say
from tests.helpers import assert_valid, describe, result_of, run_events
from tether import Agent, Limits, tool
from tether.errors import ConfigInvalid, RateLimited
from tether.loop.actions import FINAL_REQUEST
from tether.loop.context import SUMMARY_REQUEST
from tether.providers.base import ForceTool, ModelInfo
from tether.providers.scripted import ScriptedProvider, call, empty, fail, reply


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(read_only=True)
def clock() -> str:
    """The time."""
    return "noon"


@tool(name="none")
def named_none() -> str:
    """A tool whose name is also a mode."""
    return "ran"


def choices(model: ScriptedProvider) -> list[Any]:
    return [request.tool_choice for request in model.requests]


# --- checked before the run ---------------------------------------------------------------------------------


def test_a_name_no_tool_has_is_refused_when_the_agent_is_built_naming_the_tools_offered() -> None:
    with pytest.raises(ConfigInvalid, match=r"'lokup', which is not a tool this agent offers \(offered: clock, lookup"):
        Agent(ScriptedProvider([]), tools=[lookup, clock], tool_choice="lokup")


def test_required_without_any_tool_offered_is_refused() -> None:
    with pytest.raises(ConfigInvalid, match="needs a tool to call, and this agent offers none"):
        Agent(ScriptedProvider([]), tool_choice="required")


def test_a_choice_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(ConfigInvalid, match="not int"):
        Agent(ScriptedProvider([]), tools=[lookup], tool_choice=3)  # type: ignore[arg-type]


def test_a_run_s_own_choice_is_checked_against_the_tools_offered_now() -> None:
    agent = Agent(ScriptedProvider([]), tools=[lookup, clock], tool_choice="lookup")
    agent.mode = "read-only"  # lookup is no longer offered
    with pytest.raises(ConfigInvalid, match="'lookup', which is not a tool this agent offers"):
        agent.stream("go")
    with pytest.raises(ConfigInvalid, match="'nothing', which is not a tool"):
        agent.stream("go", tool_choice="nothing")
    agent.stream("go", tool_choice="clock")  # the read-only tool may be forced


def test_a_model_that_cannot_be_made_to_call_a_tool_is_refused_unless_json_actions_ask_for_it() -> None:
    with pytest.raises(ConfigInvalid, match=r"'ollama:qwen3' cannot be made to call a tool \(tool_choice='required'\)"):
        Agent("ollama:qwen3", tools=[lookup], tool_choice="required")
    with pytest.raises(ConfigInvalid, match="ForceTool\\('lookup'\\)"):
        Agent("zai:glm-4.6", api_key="k", tools=[lookup], tool_choice="lookup")
    Agent("ollama:qwen3", tools=[lookup], tool_choice="none")  # "none" is always kept
    Agent("ollama:qwen3", tools=[lookup], tool_choice="required", tool_mode="json")
    Agent("llamacpp:qwen3", tools=[lookup], tool_choice="lookup")  # kept as "required" with lookup alone


# --- kept by the requests of a run --------------------------------------------------------------------------


async def test_required_holds_until_the_model_has_called_a_tool_then_the_run_is_auto() -> None:
    model = ScriptedProvider([call("lookup", {"key": "a"}), call("lookup", {"key": "b"}), reply("a and b")])
    result = await Agent(model, tools=[lookup], tool_choice="required").run("find")
    assert choices(model) == ["required", "auto", "auto"]
    assert result.stop_reason == "complete"
    assert result.text == "a and b"


async def test_a_corrective_retry_keeps_the_required_choice_since_no_tool_was_called_yet() -> None:
    model = ScriptedProvider([empty(), call("lookup", {"key": "a"}), reply("done")])
    result = await Agent(model, tools=[lookup], tool_choice="required").run("find")
    assert choices(model) == ["required", "required", "auto"]
    assert result.text == "done"


async def test_a_forced_tool_is_sent_as_force_tool_then_auto() -> None:
    model = ScriptedProvider([call("clock"), reply("it is noon")])
    result = await Agent(model, tools=[lookup, clock], tool_choice="clock").run("time?")
    assert choices(model) == [ForceTool("clock"), "auto"]
    assert result.text == "it is noon"


async def test_a_tool_named_like_a_mode_is_forced_with_force_tool() -> None:
    model = ScriptedProvider([call("none"), reply("it ran")])
    result = await Agent(model, tools=[named_none], tool_choice=ForceTool("none")).run("go")
    assert choices(model) == [ForceTool("none"), "auto"]
    assert result.messages[2].tool_results[0].content == "ran"


async def test_none_holds_for_the_whole_run_and_calls_sent_anyway_are_dropped() -> None:
    model = ScriptedProvider([call("lookup", {"key": "a"}, text="I cannot look it up: no idea.")])
    events = await run_events(Agent(model, tools=[lookup], tool_choice="none"), "find")
    result = result_of(events)
    assert choices(model) == ["none"]
    assert model.requests[0].tools != (), "the definitions stay: some providers need them for the history"
    assert result.stop_reason == "complete"
    assert result.text == "I cannot look it up: no idea."
    assert result.messages[-1].tool_calls == ()
    assert not any(describe(e).startswith("ToolCall") for e in events)
    assert_valid(result)


async def test_a_run_s_choice_wins_over_the_agent_s_for_that_run_only() -> None:
    model = ScriptedProvider([reply("no tools"), call("lookup", {"key": "a"}), reply("a")])
    agent = Agent(model, tools=[lookup], tool_choice="required")
    await agent.run("first", tool_choice="none")
    await agent.run("second")
    assert choices(model) == ["none", "required", "auto"]


async def test_the_loop_s_summary_call_after_a_step_limit_is_none_whatever_the_run_s_choice() -> None:
    model = ScriptedProvider([call("lookup", {"key": "a"}), reply("best guess: a")])
    result = await Agent(model, tools=[lookup], tool_choice="lookup", limits=Limits(max_turns=1)).run("find")
    assert choices(model) == [ForceTool("lookup"), "none"]
    assert model.requests[1].messages[-1].text == SUMMARY_REQUEST
    assert result.stop_reason == "max_turns"
    assert result.text == "best guess: a"


def test_run_sync_and_start_take_the_run_s_choice() -> None:
    model = ScriptedProvider([reply("plain")])
    Agent(model, tools=[lookup], tool_choice="required").run_sync("go", tool_choice="none")
    assert choices(model) == ["none"]


async def test_start_takes_the_run_s_choice() -> None:
    model = ScriptedProvider([reply("plain")])
    await Agent(model, tools=[lookup]).start("go", tool_choice="none")
    assert choices(model) == ["none"]


# --- JSON action mode ---------------------------------------------------------------------------------------


def action(**fields: Any) -> str:
    return json.dumps(fields)


def json_model(*answers: str) -> ScriptedProvider:
    return ScriptedProvider([reply(a) for a in answers], supports_tools=False, supports_json_schema=True)


def variants(schema: dict[str, Any] | None) -> list[str]:
    assert schema is not None
    return [
        v["properties"]["type"]["const"] + (f":{v['properties']['name']['const']}" if "name" in v["properties"] else "")
        for v in schema["anyOf"]
    ]


async def test_in_json_mode_required_asks_for_a_call_in_the_prompt_and_the_schema_then_is_auto() -> None:
    model = json_model(action(type="tool_call", name="lookup", arguments={"key": "a"}), action(type="final", text="a"))
    result = await Agent(model, tools=[lookup, clock], tool_choice="required").run("find")
    first, second = model.requests
    assert "Now you must call a tool" in (first.system or "")
    assert variants(first.json_schema) == ["tool_call:lookup", "tool_call:clock"]
    assert "must call" not in (second.system or "")
    assert variants(second.json_schema) == ["answer", "ask_user", "tool_call:lookup", "tool_call:clock"]
    assert result.text == "a"


async def test_in_json_mode_a_forced_tool_is_the_only_action_the_schema_allows() -> None:
    model = json_model(action(type="tool_call", name="clock", arguments={}), action(type="final", text="noon"))
    await Agent(model, tools=[lookup, clock], tool_choice="clock").run("time?")
    first = model.requests[0]
    assert "Now you must call the tool clock" in (first.system or "")
    assert variants(first.json_schema) == ["tool_call:clock"]


async def test_in_json_mode_none_is_the_final_answer_only_request_and_plain_text_is_the_answer() -> None:
    model = json_model("Just the answer, no JSON.")
    result = await Agent(model, tools=[lookup], tool_choice="none").run("find")
    request = model.requests[0]
    assert variants(request.json_schema) == ["answer"]
    assert "tool_call" not in (request.system or "")
    assert request.messages[-1].text == "find", f"the user's prompt is last, not {FINAL_REQUEST!r}"
    assert result.stop_reason == "complete"
    assert result.text == "Just the answer, no JSON."


# --- over real HTTP, on servers that honour only some choices -----------------------------------------------


async def test_llamacpp_gets_a_forced_tool_as_required_with_that_tool_alone_then_every_tool_and_auto() -> None:
    with MockLLM([Call("clock", {}), Say("noon")]) as server:
        agent = Agent("llamacpp:qwen3", base_url=server.base_url, tools=[lookup, clock], tool_choice="clock")
        result = await agent.run("time?")
    first, second = server.requests
    assert (first["tool_choice"], [t["function"]["name"] for t in first["tools"]]) == ("required", ["clock"])
    assert (second["tool_choice"], [t["function"]["name"] for t in second["tools"]]) == ("auto", ["lookup", "clock"])
    assert result.text == "noon"


async def test_ollama_cannot_be_told_none_so_a_none_run_offers_it_no_tools() -> None:
    with MockLLM([Say("no tools today")]) as server:
        result = await Agent("ollama:qwen3", base_url=server.base_url, tools=[lookup], tool_choice="none").run("go")
    assert "tools" not in server.requests[0]
    assert "tool_choice" not in server.requests[0]
    assert result.text == "no tools today"


# --- TurnCompleted.status: the step vocabulary ---------------------------------------------------------------


async def test_turn_completed_says_whether_the_step_was_completed_rejected_or_failed() -> None:
    model = ScriptedProvider([empty(), call("lookup", {"key": "a"}), fail(RateLimited("busy"))])
    events = await run_events(Agent(model, tools=[lookup]), "find")
    statuses = [(e.turn, e.status) for e in events if e.kind == "turn_completed"]
    assert statuses == [(1, "rejected"), (1, "completed"), (2, "failed")]
    assert result_of(events).stop_reason == "error"


def test_a_provider_s_model_info_says_which_choices_it_keeps() -> None:
    assert ModelInfo("x", "y").tool_choices == frozenset({"auto", "none", "required", "tool"})
    assert Agent("ollama:qwen3").provider.info.tool_choices == frozenset({"auto", "none"})
    assert Agent("minimax:m", api_key="k").provider.info.tool_choices == frozenset({"auto", "none"})
    assert Agent("llamacpp:m").provider.info.tool_choices == frozenset({"auto", "none", "required", "tool"})
