"""A final answer cut off at the output limit (finish reason ``length``) is never a clean success: the loop asks
the model to go on (``Limits.answer_continuations`` times, tools off), joins what it writes to the same answer, and
a run whose answer is still cut ends ``complete`` but ``degraded``, its ``finish_reason`` ``length`` and its detail
saying so."""

from __future__ import annotations

from tether import Agent, Limits, RunCompleted, TextDelta, tool
from tether.errors import RateLimited
from tether.loop.context import CONTINUATION_REQUEST
from tether.messages import Text, Thinking, transcript_problems
from tether.providers import ScriptedProvider, call, empty, fail, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_an_answer_cut_at_the_limit_is_continued_and_joined_into_one_answer() -> None:
    model = ScriptedProvider([reply("The capital of France is", finish="length"), reply(" Paris.")])
    result = await Agent(model).run("Capital of France?")
    assert result.text == "The capital of France is Paris."
    assert result.stop_reason == "complete"
    assert not result.degraded, "the answer was finished by its continuation"
    assert result.finish_reason == "stop"
    assert "continued 1 time(s)" in result.detail
    assert [m.role for m in result.messages] == ["user", "assistant"], "one answer, the request to go on not kept"
    assert result.messages[-1].text == "The capital of France is Paris."
    assert result.turns == 2
    continuing = model.requests[1]
    assert continuing.tool_choice == "none"
    assert continuing.messages[-2].text == "The capital of France is"
    assert continuing.messages[-1].role == "user"
    assert continuing.messages[-1].text == CONTINUATION_REQUEST


async def test_an_answer_still_cut_after_its_continuations_ends_degraded_with_finish_reason_length() -> None:
    model = ScriptedProvider(
        [reply("One", finish="length"), reply(" two", finish="length"), reply(" three", finish="length")]
    )
    result = await Agent(model, limits=Limits(answer_continuations=2)).run("Count")
    assert result.text == "One two three"
    assert result.stop_reason == "complete"
    assert result.degraded
    assert result.finish_reason == "length"
    assert result.detail == "the model's answer was cut off at the output limit, still after 2 continuation(s)"
    assert len(model.requests) == 3, "bounded: answer_continuations calls, no more"


async def test_with_continuations_off_a_cut_answer_is_returned_marked_degraded() -> None:
    model = ScriptedProvider([reply("The capital of", finish="length")])
    result = await Agent(model, limits=Limits(answer_continuations=0)).run("Capital?")
    assert result.text == "The capital of"
    assert result.stop_reason == "complete"
    assert result.degraded
    assert result.finish_reason == "length"
    assert result.detail == "the model's answer was cut off at the output limit"
    model.assert_consumed()


async def test_a_continuation_that_fails_leaves_the_answer_so_far_marked_cut() -> None:
    model = ScriptedProvider([reply("Half an", finish="length"), fail(RateLimited("slow down", status=429))])
    result = await Agent(model).run("Go")
    assert result.text == "Half an"
    assert result.stop_reason == "complete"
    assert result.degraded
    assert result.finish_reason == "length", "the answer the run stopped with is the cut one"
    assert "cut off at the output limit" in result.detail
    assert transcript_problems(result.messages) == []


async def test_an_empty_continuation_leaves_the_answer_marked_cut() -> None:
    model = ScriptedProvider([reply("Half an", finish="length"), empty()])
    result = await Agent(model).run("Go")
    assert result.text == "Half an"
    assert result.degraded
    assert "cut off at the output limit" in result.detail


async def test_a_continuations_thinking_is_left_out_of_the_joined_answer() -> None:
    model = ScriptedProvider([reply("A", thinking="first", finish="length"), reply("B", thinking="again")])
    result = await Agent(model).run("Go")
    parts = result.messages[-1].parts
    assert [type(part) for part in parts] == [Thinking, Text, Text]
    assert result.text == "AB"


async def test_an_answer_after_tools_is_continued_and_the_continuation_streams_as_the_answer() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("The sum", finish="length"), reply(" is 5.")])
    events = [event async for event in Agent(model, tools=[add]).stream("2+3?")]
    shown = "".join(event.text for event in events if isinstance(event, TextDelta))
    assert shown == "The sum is 5."
    completed = events[-1]
    assert isinstance(completed, RunCompleted)
    result = completed.result
    assert result.text == "The sum is 5."
    assert not result.degraded
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


async def test_a_clean_answer_reports_its_finish_reason_and_is_not_degraded() -> None:
    result = await Agent(ScriptedProvider([reply("Hi.")])).run("Hello")
    assert result.finish_reason == "stop"
    assert not result.degraded


async def test_the_budget_spent_leaves_no_room_for_a_continuation() -> None:
    from tether.usage import Price, Usage

    model = ScriptedProvider([reply("Expensive", finish="length", usage=Usage(input_tokens=1_000_000))])
    agent = Agent(model, limits=Limits(max_cost_usd=0.5), price=Price(input=1.0, output=1.0))
    result = await agent.run("Go")
    assert len(model.requests) == 1
    assert result.degraded
    assert result.finish_reason == "length"


async def test_in_json_action_mode_a_final_action_cut_at_the_limit_is_an_answer_continued() -> None:
    """A model without native tools writes its answer as a ``final`` action; cut by the output limit, what it
    wrote is the answer so far (not an unusable action to correct), and the model is asked to go on."""
    model = ScriptedProvider(
        [reply('{"type": "final", "text": "The capital of France', finish="length"), reply(" is Paris.")],
        supports_tools=False,
    )
    result = await Agent(model, tools=[add], tool_mode="json").run("Capital of France?")
    assert result.text == "The capital of France is Paris."
    assert result.stop_reason == "complete"
    assert not result.degraded
    assert len(model.requests) == 2
    assert model.requests[1].messages[-1].text == CONTINUATION_REQUEST
