"""When only an answer is possible (after a repeated call, and the summary call after a limit), JSON action
mode constrains the model to the final action and takes any text it writes as the answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import assert_valid, check_order
from tether import Agent, Limits, tool
from tether.events import RunCompleted, RunEvent
from tether.loop.actions import FINAL_REQUEST, cut_final_text
from tether.messages import Message
from tether.providers.scripted import ScriptedProvider, reply

executed: list[str] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    executed.append("add")
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    executed.append("explode")
    raise RuntimeError("boom")


def setup_function() -> None:
    executed.clear()


def action(**fields: Any) -> str:
    return json.dumps(fields)


ADD = action(type="tool_call", name="add", arguments={"a": 17, "b": 25})


def json_model(*answers: str, schema: bool = True, repeat_last: bool = False) -> ScriptedProvider:
    steps = [reply(answer) for answer in answers]
    return ScriptedProvider(steps, supports_tools=False, supports_json_schema=schema, repeat_last=repeat_last)


async def test_after_a_repeat_the_request_allows_only_the_final_action_and_the_run_completes() -> None:
    model = json_model(ADD, ADD, action(type="final", text="17 + 25 = 42"))
    result = await Agent(model, tools=[add]).run("What is 17+25?")
    assert (result.stop_reason, result.text, result.degraded) == ("complete", "17 + 25 = 42", False)
    assert executed == ["add"]
    forced = model.requests[2]
    assert forced.json_schema is not None
    assert [variant["properties"]["type"]["const"] for variant in forced.json_schema["anyOf"]] == ["answer"]
    assert forced.system == model.requests[0].system, "the run's system prompt: the model's cache keeps its prefix"
    assert forced.messages[-1] == Message.user(FINAL_REQUEST)
    assert_valid(result)


async def test_plain_text_is_the_answer_when_only_an_answer_is_possible() -> None:
    model = json_model(ADD, ADD, "The sum is 42.", schema=False)
    result = await Agent(model, tools=[add]).run("What is 17+25?")
    assert (result.stop_reason, result.text) == ("complete", "The sum is 42.")
    assert result.messages[-1] == Message.assistant("The sum is 42.")


async def test_text_holding_json_that_is_no_action_is_the_answer_as_written() -> None:
    model = json_model(ADD, ADD, 'The result is {"sum": 42}.', schema=False)
    result = await Agent(model, tools=[add]).run("What is 17+25?")
    assert result.text == 'The result is {"sum": 42}.'


async def test_the_summary_call_after_a_limit_takes_plain_text_as_the_answer() -> None:
    other = action(type="tool_call", name="add", arguments={"a": 1, "b": 1})
    model = json_model(ADD, other, "Two sums: 42 and 2.", schema=False)
    result = await Agent(model, tools=[add], limits=Limits(max_turns=2)).run("go")
    assert (result.stop_reason, result.text) == ("max_turns", "Two sums: 42 and 2.")


async def test_a_final_action_cut_off_by_the_output_limit_is_unwrapped_to_the_text_written_so_far() -> None:
    cut = '{"type": "final", "text": "The notes say: \\"buy milk\\" and call Ali'
    model = json_model(ADD, ADD, cut, schema=False)
    result = await Agent(model, tools=[add]).run("What is in notes.txt?")
    assert (result.stop_reason, result.text) == ("complete", 'The notes say: "buy milk" and call Ali')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"type": "final", "text": "done"} and more', "done"),
        ('```json\n{"type":"final","text":"a\\nb', "a\nb"),
        ('{"type": "final", "text": "cut in an escape \\u00', "cut in an escape"),
        ('{"type": "final", "text": "', None),
        ("plain text", None),
        ('{"type": "tool_call", "name": "add"', None),
    ],
)
def test_cut_final_text_reads_only_what_begins_like_a_final_action(text: str, expected: str | None) -> None:
    assert cut_final_text(text) == expected


async def test_outside_answer_only_requests_plain_text_is_still_corrected() -> None:
    model = json_model("the answer is 42", action(type="final", text="42"), schema=False)
    result = await Agent(model, tools=[add]).run("17+25?")
    assert "not one valid JSON action" in model.requests[1].messages[-1].text
    assert result.text == "42"


async def test_a_tool_call_action_is_no_answer_and_the_run_ends_with_the_results_the_model_had() -> None:
    model = json_model(ADD, repeat_last=True, schema=False)
    result = await Agent(model, tools=[add], limits=Limits(invalid_response_retries=1)).run("17+25?")
    assert result.stop_reason == "consecutive_errors"
    assert result.text.endswith("(add) returned:\n\n42")
    assert len(model.requests) == 4
    assert executed == ["add"]


# --- property -----------------------------------------------------------------------------------------------

ARGUMENTS = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(-5, 5) | st.text(max_size=3), max_size=3)
CALL_ACTIONS = st.builds(
    lambda name, arguments, wrap: wrap.format(action(type="tool_call", name=name, arguments=arguments)),
    st.sampled_from(["add", "explode", "missing"]),
    ARGUMENTS,
    st.sampled_from(["{}", "Let me call it.\n```json\n{}\n```", "{} and then I answer"]),
)
"""Any call a model may keep asking for: valid or invalid arguments, a failing tool, an unknown one, wrapped."""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    repeated=CALL_ACTIONS,
    leading=st.lists(CALL_ACTIONS, max_size=3),
    max_turns=st.integers(1, 8),
    max_consecutive_errors=st.integers(1, 4),
    retries=st.integers(0, 2),
    schema=st.booleans(),
    concurrent=st.booleans(),
)
def test_a_model_that_repeats_a_call_forever_still_ends_with_an_answer(
    repeated: str,
    leading: list[str],
    max_turns: int,
    max_consecutive_errors: int,
    retries: int,
    schema: bool,
    concurrent: bool,
) -> None:
    """Whatever call a model keeps asking for (after any others), in JSON action mode the run ends within
    ``max_turns`` as ``complete`` or a step-limit stop, with a non-empty answer."""
    model = ScriptedProvider(
        [reply(text) for text in (*leading, repeated)],
        supports_tools=False,
        supports_json_schema=schema,
        repeat_last=True,
    )
    limits = Limits(
        max_turns=max_turns, max_consecutive_errors=max_consecutive_errors, invalid_response_retries=retries
    )
    agent = Agent(model, tools=[add, explode], limits=limits, concurrent_tools=concurrent)

    async def run() -> list[RunEvent]:
        async with asyncio.timeout(30):
            return [event async for event in agent.stream("What is 17+25?")]

    events = asyncio.run(run())
    check_order(events)
    last = events[-1]
    assert isinstance(last, RunCompleted)
    result = last.result
    assert result.stop_reason in ("complete", "max_turns", "max_tool_calls", "consecutive_errors")
    assert result.turns <= max_turns
    assert result.text.strip(), "every run ends with a non-empty answer"
    assert len(model.requests) <= max_turns * (retries + 1) + 1
    assert_valid(result)
