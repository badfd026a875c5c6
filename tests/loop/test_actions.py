"""JSON action mode (loop/actions.py): the parser, the schema, and runs of a model without native tools."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.helpers import assert_valid, check_order, describe, result_of, run_events
from tether import Agent, Limits, Message, tool
from tether.loop.actions import (
    FINAL_REQUEST,
    ActionError,
    AskAction,
    CallAction,
    FinalAction,
    action_schema,
    as_text,
    read_action,
)
from tether.messages import ToolCall, ToolResult
from tether.providers.base import ToolDefinition
from tether.providers.scripted import ScriptedProvider, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def action(**fields: Any) -> str:
    return json.dumps(fields)


def local_like(*answers: str, schema: bool = False) -> ScriptedProvider:
    return ScriptedProvider([reply(a) for a in answers], supports_tools=False, supports_json_schema=schema)


# --- reading an answer --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "tool_call", "name": "add", "arguments": {"a": 1, "b": 2}}',
        '```json\n{"type": "tool_call", "name": "add", "arguments": {"a": 1, "b": 2}}\n```',
        'Sure! I will call the tool now.\n{"type": "tool_call", "name": "add", "arguments": {"a": 1, "b": 2}} Done.',
        '```\n{"type":"tool_call","name":"add","arguments":{"a":1,"b":2}}```',
    ],
    ids=["bare", "fenced", "prose around", "fence without language"],
)
def test_an_action_is_found_in_bare_fenced_or_prose_wrapped_answers(text: str) -> None:
    assert read_action(text) == CallAction("add", {"a": 1, "b": 2})


def test_answer_and_ask_user_actions_are_read() -> None:
    assert read_action('{"type": "answer", "text": "42"}') == FinalAction("42")
    assert read_action('{"type": "final", "text": "42"}') == FinalAction("42"), "the name it had before"
    assert read_action('{"type": "ask_user", "question": "Which file?"}') == AskAction("Which file?")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"type": "tool_call", "name": "add", "arguments": {"a": 1,', "no complete JSON object"),
        ("", "empty"),
        ("I think the answer is 42.", "no complete JSON object"),
        ('{"type": "final", "text": 42}', '"text" string'),
        ('{"type": "tool_call", "arguments": {}}', '"name" string'),
        ('{"type": "tool_call", "name": "add", "arguments": [1, 2]}', "must be a JSON object"),
        ('{"type": "reply", "text": "x"}', '"type" must be'),
        ('{"type": "ask_user"}', '"question" string'),
    ],
    ids=[
        "truncated",
        "empty",
        "prose only",
        "text not a string",
        "no name",
        "arguments a list",
        "bad type",
        "no question",
    ],
)
def test_an_answer_that_is_not_one_valid_action_is_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(ActionError, match=why):
        read_action(text)


def test_the_schema_is_the_union_of_final_ask_user_and_one_call_per_tool_with_its_own_arguments() -> None:
    nested = {
        "type": "object",
        "properties": {"where": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        "required": ["where"],
    }
    tools = (ToolDefinition("add", "Add.", add.parameters), ToolDefinition("weather", "Weather.", nested))
    schema = action_schema(tools)
    validator = jsonschema.Draft202012Validator(schema)
    assert len(schema["anyOf"]) == 4
    valid = [
        {"type": "answer", "text": "x"},
        {"type": "ask_user", "question": "y"},
        {"type": "tool_call", "name": "add", "arguments": {"a": 1, "b": 2}},
        {"type": "tool_call", "name": "weather", "arguments": {"where": {"city": "Oslo"}}},
    ]
    invalid = [
        {"type": "tool_call", "name": "subtract", "arguments": {}},
        {"type": "tool_call", "name": "add", "arguments": {"a": "one", "b": 2}},
        {"type": "tool_call", "name": "weather", "arguments": {"where": {}}},
        {"type": "answer"},
    ]
    assert all(validator.is_valid(v) for v in valid)
    assert not any(validator.is_valid(v) for v in invalid)
    final_only = action_schema(tools, final_only=True)
    assert [v["properties"]["type"]["const"] for v in final_only["anyOf"]] == ["answer"]


def test_calls_and_results_are_shown_to_the_model_as_text() -> None:
    history = [
        Message.user("2+3?"),
        Message("assistant", (ToolCall("c1", "add", {"a": 2, "b": 3}),)),
        Message("tool", (ToolResult("c1", "add", "5"), ToolResult("c2", "add", "boom", is_error=True))),
    ]
    shown = as_text(history)
    assert shown[0] == history[0]
    assert json.loads(shown[1].text) == {"type": "tool_call", "name": "add", "arguments": {"a": 2, "b": 3}}
    assert shown[2] == Message.user("Tool add returned: 5\n\nTool add failed: boom")


# --- runs ---------------------------------------------------------------------------------------------------


async def test_a_model_without_native_tools_calls_a_tool_through_json_actions() -> None:
    model = local_like(
        action(type="tool_call", name="add", arguments={"a": 17, "b": 25}), action(type="final", text="42")
    )
    events = await run_events(Agent(model, tools=[add], system="Be brief."), "17+25?")
    check_order(events)
    result = result_of(events)
    assert result.text == "42"
    assert result.stop_reason == "complete"
    first, second = model.requests
    assert first.tools == ()
    assert first.system is not None
    assert first.system.startswith("Be brief.")
    assert "- add: Add two integers." in first.system
    assert first.json_schema is None, "this provider cannot constrain its output"
    assert second.messages[-1] == Message.user("Tool add returned: 42")
    call = result.messages[2].tool_calls[0]
    assert (call.name, call.arguments) == ("add", {"a": 17, "b": 25}), "the transcript keeps native calls"
    assert_valid(result)
    texts = [describe(e) for e in events if describe(e).startswith("Text")]
    assert texts == ["Text('42')"], "the raw JSON is not streamed; the answer is"


async def test_the_action_schema_is_sent_to_a_provider_that_can_use_it() -> None:
    model = local_like(action(type="final", text="hi"), schema=True)
    await Agent(model, tools=[add]).run("hello")
    schema = model.requests[0].json_schema
    assert schema is not None
    assert [v["properties"]["type"]["const"] for v in schema["anyOf"]] == ["answer", "ask_user", "tool_call"]


async def test_a_malformed_action_gets_one_correction_then_the_run_stops_as_invalid_response() -> None:
    model = local_like("I will add them.", '{"type": "tool_call", "name": "add"')
    result = await Agent(model, tools=[add]).run("17+25?")
    assert "not one valid JSON action" in model.requests[1].messages[-1].text
    assert result.stop_reason == "invalid_response"
    assert result.degraded


async def test_a_malformed_action_corrected_on_the_retry_continues() -> None:
    model = local_like("the answer is 42", action(type="final", text="42"))
    result = await Agent(model, tools=[add]).run("17+25?")
    assert result.text == "42"
    assert result.stop_reason == "complete"


async def test_ask_user_ends_the_run_with_the_question() -> None:
    model = local_like(action(type="ask_user", question="Which numbers?"))
    result = await Agent(model, tools=[add]).run("add them")
    assert result.stop_reason == "ask_user"
    assert result.text == "Which numbers?"
    assert not result.degraded
    assert result.messages[-1] == Message.assistant("Which numbers?")


async def test_the_summary_call_in_json_mode_asks_for_a_final_answer_only_under_the_runs_system_prompt() -> None:
    """Only the schema and the last message change: the system prompt is the one every turn had, so that a model
    that keeps what it last read (the embedded one) evaluates only the new request."""
    call = action(type="tool_call", name="add", arguments={"a": 1, "b": 1})
    model = local_like(
        call,
        action(type="tool_call", name="add", arguments={"a": 2, "b": 2}),
        action(type="final", text="4"),
        schema=True,
    )
    result = await Agent(model, tools=[add], limits=Limits(max_turns=2)).run("go")
    assert result.stop_reason == "max_turns"
    assert result.text == "4"
    summary = model.requests[-1]
    assert summary.json_schema is not None
    assert len(summary.json_schema["anyOf"]) == 1
    assert summary.system == model.requests[0].system == model.requests[1].system
    assert summary.messages[-1] == Message.user(FINAL_REQUEST)


async def test_json_mode_can_be_chosen_for_a_model_with_native_tools() -> None:
    model = ScriptedProvider([reply(action(type="final", text="ok"))])
    result = await Agent(model, tools=[add], tool_mode="json").run("go")
    assert model.requests[0].tools == ()
    assert result.text == "ok"
