"""Agents as tools (``agent.as_tool()``): a sub-run is part of the calling run.

Three levels of delegation (``boss`` -> ``middle`` -> ``inner``) on scripted models: one budget shared by all,
a cancel that reaches the innermost tool, usage that adds up exactly, every transcript valid; and the call's
result for each way a sub-run can end, its input and output types, its deps and its events.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from tether import Agent, Limits, RunContext, StopReason, tool
from tether.events import RunCompleted, RunEvent, RunResult, SubAgentEvent, ToolCallStarted, ToolResultReceived
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.testing.runs import assert_valid_transcript
from tether.usage import Price, Usage

PRICE = Price(input=1000.0, output=1000.0)
"""$1,000 per million tokens: a scripted call of 100 + 10 tokens costs $0.11."""
CALL = Usage(input_tokens=100, output_tokens=10)
ONE_CALL = Usage(input_tokens=100, output_tokens=10, requests=1)
"""A call's usage as the run counts it (a request each)."""


def said(text: str) -> Any:
    return reply(text, usage=CALL)


def calls(name: str, arguments: dict[str, Any]) -> Any:
    return call(name, arguments, usage=CALL)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Relayed:
    """An event sink that keeps every event, relayed ones too."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def __call__(self, event: RunEvent) -> None:
        self.events.append(event)

    def results(self, *path: str) -> list[RunResult[Any]]:
        """The results of the sub-runs at ``path``, in the order they ended."""
        return [
            event.event.result
            for event in self.events
            if type(event) is SubAgentEvent and event.path == path and type(event.event) is RunCompleted
        ]


def three_levels(inner_tools: list[Any], inner_script: list[Any], limits: Limits | None = None) -> Agent[Any, Any]:
    inner = Agent(ScriptedProvider(inner_script), tools=inner_tools, price=PRICE)
    middle = Agent(
        ScriptedProvider([calls("inner", {"input": "do it"}), said("middle done")]),
        tools=[inner.as_tool(name="inner", description="The inner agent.")],
        price=PRICE,
    )
    return Agent(
        ScriptedProvider([calls("middle", {"input": "delegate"}), said("boss done")]),
        tools=[middle.as_tool(name="middle")],
        price=PRICE,
        limits=limits,
    )


async def test_a_three_level_delegation_answers_and_its_usage_adds_up_exactly() -> None:
    sink = Relayed()
    boss = three_levels([add], [calls("add", {"a": 2, "b": 3}), said("5")])
    result = await boss.run("go", on_event=sink)
    (middle,) = sink.results("middle")
    (inner,) = sink.results("middle", "inner")
    assert (result.stop_reason, middle.stop_reason, inner.stop_reason) == ("complete",) * 3
    assert (result.text, middle.text, inner.text) == ("boss done", "middle done", "5")
    assert inner.usage == Usage(200, 20, requests=2)
    assert middle.usage == Usage(400, 40, requests=4)  # its own two calls and the inner agent's
    assert result.usage == Usage(600, 60, requests=6)
    assert result.cost is not None
    assert result.cost.total_usd == pytest.approx(6 * 0.11)
    for each in (result, middle, inner):
        assert_valid_transcript(each)
    # the middle call's record holds the middle agent's calls, and under its call, the inner agent's
    (middle_call,) = result.turn_records[0].tool_calls
    assert [record.usage for record in middle_call.turn_records] == [ONE_CALL, ONE_CALL]
    (inner_call,) = middle_call.turn_records[0].tool_calls
    assert [record.text for record in inner_call.turn_records] == ["", "5"]
    assert inner_call.turn_records[0].tool_calls[0].name == "add"


async def test_the_innermost_agent_spending_the_shared_budget_stops_all_three_with_budget() -> None:
    sink = Relayed()
    script = [calls("add", {"a": n, "b": n}) for n in range(10)]
    boss = three_levels([add], script, limits=Limits(max_cost_usd=0.5))
    result = await boss.run("go", on_event=sink)
    (middle,) = sink.results("middle")
    (inner,) = sink.results("middle", "inner")
    assert (result.stop_reason, middle.stop_reason, inner.stop_reason) == ("budget",) * 3
    # the boss spent $0.11, the middle $0.11: the inner agent had $0.28 and stopped after the call that passed it
    assert inner.usage.requests == 3
    assert middle.usage.requests == 1 + 3
    assert result.usage.requests == 1 + 1 + 3
    assert result.usage == Usage(500, 50, requests=5)
    assert result.cost is not None
    assert result.cost.total_usd >= 0.5
    for each in (result, middle, inner):
        assert_valid_transcript(each)
    # the boss's call was answered with an error saying why, never with an answer
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.tool_results[0].is_error


async def test_cancelling_the_run_during_the_innermost_tool_ends_all_three_cancelled() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait until cancelled."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    sink = Relayed()
    boss = three_levels([wait_forever], [calls("wait_forever", {})])
    handle = boss.start("go", on_event=sink)
    await started.wait()
    handle.cancel()
    result = await handle
    (middle,) = sink.results("middle")
    (inner,) = sink.results("middle", "inner")
    assert (result.stop_reason, middle.stop_reason, inner.stop_reason) == ("cancelled",) * 3
    for each in (result, middle, inner):
        assert_valid_transcript(each)
    assert inner.usage.requests == 1
    assert result.usage == Usage(300, 30, requests=3)  # every call made, at every level, counted once


async def test_a_failed_sub_run_is_an_error_result_and_the_calling_run_goes_on() -> None:
    helper = Agent(ScriptedProvider([calls("add", {"a": 1, "b": 1}), calls("add", {"a": 2, "b": 2})]), tools=[add])
    boss = Agent(
        ScriptedProvider([calls("helper", {"input": "sum"}), said("the helper failed")]),
        tools=[helper.as_tool(name="helper", max_output=2000)],
    )
    helper.limits = Limits(max_turns=1)
    events = [event async for event in boss.stream("go")]
    results = [event.result for event in events if type(event) is ToolResultReceived]
    final = events[-1]
    assert isinstance(final, RunCompleted)
    assert final.result.stop_reason == "complete"
    assert results[0].is_error
    assert results[0].code == "tool_failed"
    assert "did not finish its task" in results[0].content


async def test_a_sub_run_that_fails_is_never_a_confident_answer() -> None:
    helper = Agent(ScriptedProvider([]))  # its model fails at once: the script is empty
    boss = Agent(ScriptedProvider([calls("helper", {"input": "x"}), said("ok")]), tools=[helper.as_tool(name="helper")])
    result = await boss.run("go")
    (message,) = [m for m in result.messages if m.role == "tool"]
    (answer,) = message.tool_results
    assert answer.is_error
    assert "(error:" in answer.content


class Question(BaseModel):
    city: str
    days: int


class Forecast(BaseModel):
    city: str
    sunny_days: int


async def test_a_typed_input_is_the_prompt_as_json_and_a_typed_output_is_the_result() -> None:
    weather_model = ScriptedProvider([reply('{"city": "Oslo", "sunny_days": 2}')])
    weather = Agent(weather_model, output_type=Forecast, output_mode="prompted")
    as_tool = weather.as_tool(name="weather", description="Forecasts.", input_type=Question)
    assert as_tool.parameters["required"] == ["city", "days"]
    boss = Agent(
        ScriptedProvider([calls("weather", {"city": "Oslo", "days": 3}), said("2 sunny days")]), tools=[as_tool]
    )
    result = await boss.run("go")
    prompt = weather_model.requests[0].messages[-1].text
    assert prompt == '{"city":"Oslo","days":3}'
    tool_message = next(m for m in result.messages if m.role == "tool")
    assert tool_message.tool_results[0].content == '{"city": "Oslo", "sunny_days": 2}'


async def test_arguments_that_do_not_fit_the_input_type_are_refused_before_the_agent_runs() -> None:
    weather_model = ScriptedProvider([])
    tool_ = Agent(weather_model).as_tool(name="weather", input_type=Question)
    boss = Agent(ScriptedProvider([calls("weather", {"city": "Oslo"}), said("ok")]), tools=[tool_])
    result = await boss.run("go")
    answer = next(m for m in result.messages if m.role == "tool").tool_results[0]
    assert answer.code == "invalid_arguments"
    assert weather_model.requests == []


@dataclass
class Shop:
    stock: dict[str, int]


@tool
def in_stock(ctx: RunContext[Shop], item: str) -> int:
    """How many of an item are in stock."""
    return ctx.deps.stock.get(item, 0)


async def test_the_sub_run_is_given_the_calling_runs_deps() -> None:
    clerk = Agent(ScriptedProvider([calls("in_stock", {"item": "pear"}), said("7 pears")]), tools=[in_stock])
    boss = Agent(
        ScriptedProvider([calls("clerk", {"input": "pears?"}), said("7")]),
        tools=[clerk.as_tool(name="clerk")],
        deps_type=Shop,
    )
    sink = Relayed()
    result = await boss.run("go", deps=Shop({"pear": 7}), on_event=sink)
    assert result.text == "7"
    relayed = [e.event for e in sink.events if type(e) is SubAgentEvent and type(e.event) is ToolResultReceived]
    assert isinstance(relayed[0], ToolResultReceived)
    assert relayed[0].result == ToolResult(relayed[0].result.call_id, "in_stock", "7")


async def test_sub_run_events_are_relayed_in_the_stream_tagged_with_their_path_between_the_calls_events() -> None:
    boss = three_levels([add], [calls("add", {"a": 2, "b": 3}), said("5")])
    events = [event async for event in boss.stream("go")]
    kinds = [type(event).__name__ for event in events]
    first, last = kinds.index("SubAgentEvent"), len(kinds) - 1 - kinds[::-1].index("SubAgentEvent")
    assert kinds[first - 1] == "ToolCallStarted"
    assert kinds[last + 1] == "ToolResultReceived"
    paths = {event.path for event in events if type(event) is SubAgentEvent}
    assert paths == {("middle",), ("middle", "inner")}
    nested = [e for e in events if type(e) is SubAgentEvent and e.path == ("middle", "inner")]
    assert type(nested[0].event).__name__ == "RunStarted"
    assert type(nested[-1].event) is RunCompleted
    assert all(type(e.event) is not SubAgentEvent for e in events if type(e) is SubAgentEvent)
    assert len({e.call_ids for e in nested}) == 1


async def test_the_sub_run_makes_no_more_tool_calls_than_the_calling_run_has_left() -> None:
    helper = Agent(
        ScriptedProvider([calls("add", {"a": n, "b": n}) for n in range(5)] + [said("stopped")]), tools=[add]
    )
    boss = Agent(
        ScriptedProvider([calls("helper", {"input": "add"}), said("done")]),
        tools=[helper.as_tool(name="helper")],
        limits=Limits(max_tool_calls=3),
    )
    sink = Relayed()
    result = await boss.run("go", on_event=sink)
    (inner,) = sink.results("helper")
    assert inner.stop_reason == "max_tool_calls"  # it had 2 left (the boss's call to it was the first)
    ran = [e for e in sink.events if type(e) is SubAgentEvent and type(e.event) is ToolResultReceived]
    assert sum(not e.event.result.is_error for e in ran) == 2  # type: ignore[union-attr]
    assert result.stop_reason in (StopReason.COMPLETE, StopReason.MAX_TOOL_CALLS)
    assert_valid_transcript(result)


async def test_the_sub_run_ends_by_the_calling_runs_deadline() -> None:
    helper = Agent(ScriptedProvider([reply("late", delay=30)]))
    boss = Agent(
        ScriptedProvider([calls("helper", {"input": "x"}), said("never")]),
        tools=[helper.as_tool(name="helper")],
        limits=Limits(run_timeout=0.2),
    )
    sink = Relayed()
    result = await boss.run("go", on_event=sink)
    (inner,) = sink.results("helper")
    assert result.stop_reason == "timeout"
    assert inner.stop_reason in ("timeout", "cancelled")
    assert_valid_transcript(result)
    assert_valid_transcript(inner)


async def test_sub_agents_run_together_their_events_told_apart_by_call_and_their_usage_summed() -> None:
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}

    @tool
    async def wait_for(key: str) -> str:
        """Wait for the other call, then answer."""
        gates[key].set()
        await gates["b" if key == "a" else "a"].wait()
        return key

    def helper(key: str) -> Agent[Any, Any]:
        return Agent(ScriptedProvider([calls("wait_for", {"key": key}), said(key)]), tools=[wait_for], price=PRICE)

    boss = Agent(
        ScriptedProvider(
            [
                parallel(call("one", {"input": "a"}, id="c1"), call("two", {"input": "b"}, id="c2"), usage=CALL),
                said("a and b"),
            ]
        ),
        tools=[helper("a").as_tool(name="one", concurrent=True), helper("b").as_tool(name="two", concurrent=True)],
        price=PRICE,
    )
    sink = Relayed()
    result = await boss.run("go", on_event=sink)  # each waits for the other: only together do they end
    assert result.text == "a and b"
    assert result.usage == Usage(600, 60, requests=6)
    relayed = [e for e in sink.events if type(e) is SubAgentEvent]
    assert {(e.path, e.call_ids) for e in relayed} == {(("one",), ("c1",)), (("two",), ("c2",))}
    assert_valid_transcript(result)


def stalling_helper() -> tuple[Agent[None, str], asyncio.Event]:
    """An agent whose one tool call never returns, and the event set once that call is cancelled."""
    cancelled = asyncio.Event()

    @tool
    async def stall() -> str:
        """Never returns."""
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return "never"

    return Agent(ScriptedProvider([calls("stall", {})]), tools=[stall]), cancelled


async def test_a_call_past_its_timeout_cancels_its_sub_run_and_is_a_timeout_result() -> None:
    helper, cancelled = stalling_helper()
    boss = Agent(
        ScriptedProvider([calls("helper", {"input": "x"}), said("it timed out")]),
        tools=[helper.as_tool(name="helper", timeout=0.2)],
    )
    sink = Relayed()
    result = await boss.run("go", on_event=sink)
    assert cancelled.is_set()
    (inner,) = sink.results("helper")
    assert inner.stop_reason == "cancelled"
    assert_valid_transcript(inner)
    answer = next(m for m in result.messages if m.role == "tool").tool_results[0]
    assert answer.code == "tool_timeout"
    assert result.text == "it timed out"
    assert result.usage.requests == 3


async def test_a_consumer_that_leaves_mid_way_cancels_the_sub_run_it_was_relaying() -> None:
    helper, cancelled = stalling_helper()
    boss = Agent(ScriptedProvider([calls("helper", {"input": "x"})]), tools=[helper.as_tool(name="helper")])
    stream = boss.stream("go")
    async for event in stream:
        if type(event) is SubAgentEvent and type(event.event) is ToolCallStarted:
            break
    await stream.aclose()
    assert cancelled.is_set()
    assert stream.result is not None
    assert stream.result.stop_reason == "cancelled"
    assert_valid_transcript(stream.result)


async def test_the_testing_helpers_describe_a_relayed_event_by_its_path() -> None:
    from tether.testing.runs import describe

    boss = three_levels([add], [calls("add", {"a": 2, "b": 3}), said("5")])
    described = [describe(event) async for event in boss.stream("go")]
    assert "SubAgent(middle/inner: ToolResult(add -> 5))" in described
    assert "ToolResult(middle -> middle done)" in described


async def test_every_count_of_a_sub_runs_usage_joins_the_callers() -> None:
    cached = Usage(100, 10, cache_read_tokens=7, cache_write_tokens=5, reasoning_tokens=3, requests=1,
                   cache_write_1h_tokens=2)  # fmt: skip
    helper = Agent(ScriptedProvider([reply("done", usage=cached)]))
    boss = Agent(ScriptedProvider([calls("helper", {"input": "x"}), said("ok")]), tools=[helper.as_tool(name="helper")])
    usage = (await boss.run("go")).usage
    counts = (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens)
    assert counts == (300, 30, 7, 5)
    assert (usage.reasoning_tokens, usage.cache_write_1h_tokens) == (3, 2)
