"""Document 000 (fae_llm, Phase 3.1: the agent loop engine), its Task 8 integration scenarios and the testable
statements of Tasks 1-6, against tether's public API (docs/conformance.md, section 000)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import tether
from tether import Agent, Limits, RunEvent, StopReason, TextDelta, Tool, Usage, tool
from tether.errors import ConfigInvalid
from tether.providers import (
    ScriptedProvider,
    StreamEnd,
    StreamStart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    call,
    empty,
    events,
    hang,
    parallel,
    reply,
)
from tether.providers import (
    TextDelta as LlmTextDelta,
)
from tether.providers import (
    ThinkingDelta as LlmThinkingDelta,
)
from tether.testing import assert_valid_transcript, describe, result_of, run_events


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def double(n: int) -> int:
    """Double an integer."""
    return 2 * n


# --- Task 8: the integration scenarios ----------------------------------------------------------------------


async def test_000_s01_text_only_response_completes_in_one_turn() -> None:
    found = await run_events(Agent(ScriptedProvider([reply("Hello there")])), "hi")
    assert [describe(e) for e in found] == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('Hello there')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    result = result_of(found)
    assert (result.text, result.stop_reason, result.turns) == ("Hello there", StopReason.COMPLETE, 1)


async def test_000_s02_single_tool_call_feeds_its_result_back_and_completes() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    result = await Agent(model, tools=[add]).run("2+3?")
    assert (result.text, result.stop_reason, result.turns) == ("5", StopReason.COMPLETE, 2)
    (fed_back,) = model.requests[1].messages[-1].tool_results
    assert (fed_back.name, fed_back.content, fed_back.is_error) == ("add", "5", False)
    assert_valid_transcript(result)


async def test_000_s03_multi_turn_tool_loop_chains_each_result_into_the_next_call() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), call("double", {"n": 5}), reply("10")])
    result = await Agent(model, tools=[add, double]).run("(2+3)*2?")
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [r.content for m in result.messages for r in m.tool_results] == ["5", "10"]
    assert (result.text, result.turns) == ("10", 3)


async def test_000_s04_max_turns_stops_the_loop_with_max_turns() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}), reply("4, I think")])
    result = await Agent(model, tools=[add], limits=Limits(max_turns=2)).run("go")
    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.degraded
    assert model.requests[-1].tool_choice == "none", "the answer after the limit is asked for with tools off"
    assert result.text == "4, I think"
    model.assert_consumed()


async def test_000_s05_calls_past_max_tool_calls_per_turn_are_refused_not_run() -> None:
    ran: list[int] = []

    @tool
    def note(n: int) -> str:
        """Note a number."""
        ran.append(n)
        return "noted"

    turn = parallel(call("note", {"n": 1}), call("note", {"n": 2}), call("note", {"n": 3}))
    model = ScriptedProvider([turn, reply("done")])
    result = await Agent(model, tools=[note], limits=Limits(max_tool_calls_per_turn=2)).run("go")
    assert ran == [1, 2]
    results = model.requests[1].messages[-1].tool_results
    assert [r.is_error for r in results] == [False, False, True]
    assert "at most 2 run per turn" in results[2].content
    assert result.stop_reason == StopReason.COMPLETE
    assert_valid_transcript(result)


async def test_000_s06_request_timeout_stops_a_provider_that_takes_too_long() -> None:
    result = await Agent(ScriptedProvider([hang()]), limits=Limits(request_timeout=0.05)).run("go")
    assert result.stop_reason == StopReason.TIMEOUT
    assert result.error is not None
    assert getattr(result.error, "code", None) == "timeout"
    assert "request_timeout" in result.detail


async def test_000_s07_tool_timeout_becomes_an_error_result_and_the_loop_goes_on() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        """Too slow."""
        await asyncio.Event().wait()
        return "unreachable"

    result = await Agent(ScriptedProvider([call("slow"), reply("gave up")]), tools=[slow]).run("go")
    (timed_out,) = result.messages[2].tool_results
    assert (timed_out.is_error, timed_out.code) == (True, "tool_timeout")
    assert (result.text, result.stop_reason) == ("gave up", StopReason.COMPLETE)


async def test_000_s08_cancellation_mid_stream_returns_cancelled_with_the_partial_text() -> None:
    streaming = asyncio.Event()

    def watch(event: RunEvent) -> None:
        if isinstance(event, TextDelta):
            streaming.set()

    handle = Agent(ScriptedProvider([hang("Thinking about")]), on_event=watch).start("go")
    await streaming.wait()
    handle.cancel()
    result = await handle
    assert result.stop_reason == StopReason.CANCELLED
    assert result.text == "Thinking about"
    assert [m.role for m in result.messages] == ["user"]


async def test_000_s09_cancellation_mid_tool_cancels_it_and_answers_the_call() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def long_job() -> str:
        """Takes forever."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    handle = Agent(ScriptedProvider([call("long_job")]), tools=[long_job], limits=Limits(tool_timeout=None)).start("go")
    await started.wait()
    handle.cancel()
    result = await handle
    assert cancelled.is_set()
    assert result.stop_reason == StopReason.CANCELLED
    (answered,) = result.messages[-1].tool_results
    assert answered.code == "cancelled"
    assert_valid_transcript(result)


async def test_000_s10_invalid_tool_args_become_an_error_result_and_the_loop_goes_on() -> None:
    model = ScriptedProvider([call("add", '{"a": 1, "b":'), call("add", {"a": 1, "b": "two"}), reply("sorry")])
    result = await Agent(model, tools=[add]).run("go")
    (bad_json,) = result.messages[2].tool_results
    (bad_type,) = result.messages[4].tool_results
    assert (bad_json.code, bad_type.code) == ("invalid_arguments", "invalid_arguments")
    assert "b" in bad_type.content
    assert (result.text, result.stop_reason) == ("sorry", StopReason.COMPLETE)


async def test_000_s11_unknown_tool_name_becomes_an_error_result_naming_the_tools() -> None:
    model = ScriptedProvider([call("subtract", {"a": 1}), reply("ok")])
    result = await Agent(model, tools=[add]).run("go")
    (unknown,) = result.messages[2].tool_results
    assert (unknown.is_error, unknown.code) == (True, "tool_not_found")
    assert "subtract" in unknown.content
    assert "add" in unknown.content
    assert result.stop_reason == StopReason.COMPLETE


async def test_000_s12_empty_response_is_retried_once_then_stops_degraded() -> None:
    recovered = await Agent(ScriptedProvider([empty(), reply("here")])).run("go")
    assert (recovered.text, recovered.stop_reason) == ("here", StopReason.COMPLETE)
    stopped = await Agent(ScriptedProvider([empty(), empty()])).run("go")
    assert stopped.stop_reason == StopReason.INVALID_RESPONSE
    assert stopped.degraded
    assert stopped.text


def test_000_s13_one_agent_serves_runs_on_several_threads_at_once() -> None:
    agent = Agent(ScriptedProvider.echo())
    answers: dict[int, str] = {}
    barrier = threading.Barrier(4)

    def ask(n: int) -> None:
        barrier.wait()
        answers[n] = agent.run_sync(f"echo {n}").text

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == {n: f"echo {n}" for n in range(4)}


# --- Tasks 1-6: the types, the accumulator, validation, the executor, the loop, continuation ------------------


def test_000_t1_limits_carry_the_guards_with_defaults_and_refuse_bad_values() -> None:
    limits = Limits()
    assert (limits.max_turns, limits.max_tool_calls_per_turn) == (20, 16)
    assert (limits.request_timeout, limits.tool_timeout) == (60.0, 60.0)
    assert Limits(max_turns=5, tool_timeout=2.5).max_turns == 5
    with pytest.raises(ConfigInvalid) as refused:
        Limits(max_tool_calls_per_turn=0)
    assert refused.value.code == "config_invalid"


def test_000_t1_stop_reasons_cover_complete_limits_cancelled_and_error() -> None:
    names = {reason.value for reason in StopReason}
    assert {"complete", "max_turns", "max_tool_calls", "cancelled", "error"} <= names


async def test_000_t1_the_result_carries_turns_final_text_total_usage_and_stop_reason() -> None:
    first, second = Usage(input_tokens=10, output_tokens=3), Usage(input_tokens=20, output_tokens=4)
    model = ScriptedProvider([call("add", {"a": 1, "b": 2}, usage=first), reply("3", usage=second)])
    result = await Agent(model, tools=[add]).run("1+2?")
    assert (result.turns, result.text, result.stop_reason) == (2, "3", StopReason.COMPLETE)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 7)
    assert [(u.input_tokens, u.output_tokens) for u in result.turn_usage] == [(10, 3), (20, 4)]
    one, two = result.turn_records
    assert (one.finish_reason, two.finish_reason) == ("tool_calls", "stop")
    (executed,) = one.tool_calls
    assert (executed.call_id, executed.name, executed.is_error) == ("call_1", "add", False)
    assert executed.duration_ms is not None
    assert executed.duration_ms >= 0


async def test_000_t1_a_provider_failure_stops_with_error_and_the_error_itself() -> None:
    from tether.errors import ProviderUnavailable
    from tether.providers import fail

    result = await Agent(ScriptedProvider([fail(ProviderUnavailable("down"))])).run("go")
    assert result.stop_reason == StopReason.ERROR
    assert isinstance(result.error, ProviderUnavailable)


async def test_000_t2_interleaved_parallel_calls_text_and_thinking_are_assembled() -> None:
    stream = events(
        StreamStart(),
        LlmThinkingDelta("Two sums. "),
        LlmTextDelta("Adding "),
        ToolCallStart("c1", "add", 0),
        ToolCallStart("c2", "add", 1),
        ToolCallDelta("c1", '{"a": 1, '),
        ToolCallDelta("c2", '{"a": 2, '),
        LlmTextDelta("both."),
        ToolCallDelta("c2", '"b": 2}'),
        ToolCallDelta("c1", '"b": 1}'),
        ToolCallEnd("c1"),
        ToolCallEnd("c2"),
        StreamEnd("tool_calls", Usage()),
    )
    result = await Agent(ScriptedProvider([stream, reply("2 and 4")]), tools=[add]).run("go")
    assistant = result.messages[1]
    assert assistant.text == "Adding both."
    assert [p.text for p in assistant.parts if isinstance(p, tether.Thinking)] == ["Two sums. "]
    assert [(c.id, c.arguments) for c in assistant.tool_calls] == [("c1", {"a": 1, "b": 1}), ("c2", {"a": 2, "b": 2})]
    assert [r.content for r in result.messages[2].tool_results] == ["2", "4"]


async def test_000_t2_a_stream_error_stops_the_run_with_the_error() -> None:
    from tether.errors import ProviderUnavailable
    from tether.providers import fail

    result = await Agent(ScriptedProvider([fail(ProviderUnavailable("cut"), after_text="partial")])).run("go")
    assert result.stop_reason == StopReason.ERROR
    assert isinstance(result.error, ProviderUnavailable)
    assert result.text == "partial"


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "limit": {"type": "integer"},
        "exact": {"type": "boolean"},
        "weight": {"type": "number"},
        "tags": {"type": "array"},
        "filter": {"type": "object", "properties": {"lang": {"type": "string"}}, "required": ["lang"]},
    },
    "required": ["query"],
}


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ({}, "'query' is a required property"),
        ({"query": 1}, "query"),
        ({"query": "q", "limit": "3"}, "limit"),
        ({"query": "q", "exact": "yes"}, "exact"),
        ({"query": "q", "weight": "heavy"}, "weight"),
        ({"query": "q", "tags": "a,b"}, "tags"),
        ({"query": "q", "filter": {"lang": 5}}, "filter.lang"),
        ({"query": "q", "filter": {}}, "lang"),
    ],
)
async def test_000_t3_arguments_are_validated_against_the_schema_field_by_field(
    arguments: dict[str, Any], complaint: str
) -> None:
    search = Tool.from_schema("search", "Search.", SCHEMA, lambda given: "ran")
    result = await Agent(ScriptedProvider([call("search", arguments), reply("ok")]), tools=[search]).run("go")
    (refused,) = result.messages[2].tool_results
    assert (refused.is_error, refused.code) == (True, "invalid_arguments")
    assert complaint in refused.content


@pytest.mark.parametrize("schema", [{}, {"type": "object"}, {"properties": {"q": {"type": "string"}}}])
async def test_000_t3_a_schema_without_required_or_properties_accepts_the_call(schema: dict[str, Any]) -> None:
    seen: list[Any] = []
    anything = Tool.from_schema("anything", "Anything.", schema, seen.append)
    model = ScriptedProvider([call("anything", {"q": "x", "n": [1, {"deep": True}]}), reply("ok")])
    await Agent(model, tools=[anything]).run("go")
    assert seen == [{"q": "x", "n": [1, {"deep": True}]}]


async def test_000_t4_calls_of_one_turn_run_one_after_the_other_in_the_models_order() -> None:
    order: list[str] = []

    @tool
    async def step(name: str) -> str:
        """One step."""
        order.append(f"start {name}")
        await asyncio.sleep(0)
        order.append(f"end {name}")
        return name

    turn = parallel(call("step", {"name": "a"}), call("step", {"name": "b"}))
    await Agent(ScriptedProvider([turn, reply("ok")]), tools=[step]).run("go")
    assert order == ["start a", "end a", "start b", "end b"]


async def test_000_t5_an_answer_stopped_at_the_output_limit_is_the_final_text() -> None:
    stream = events(StreamStart(), LlmTextDelta("cut sh"), StreamEnd("length", Usage()))
    result = await Agent(ScriptedProvider([stream]), limits=Limits(answer_continuations=0)).run("go")
    assert (result.stop_reason, result.text) == (StopReason.COMPLETE, "cut sh")
    assert result.turn_records[-1].finish_reason == "length"
    assert (result.degraded, result.finish_reason) == (True, "length"), "marked: never a clean success"
    continued = await Agent(ScriptedProvider([stream, reply("ort.")])).run("go")
    assert (continued.stop_reason, continued.text, continued.degraded) == (StopReason.COMPLETE, "cut short.", False)


async def test_000_t5_the_registry_s_tool_definitions_and_the_system_prompt_reach_the_provider() -> None:
    model = ScriptedProvider([reply("ok")])
    await Agent(model, tools=[add, double], system="Be brief.").run("hi")
    (request,) = model.requests
    assert [t.name for t in request.tools] == ["add", "double"]
    assert request.tools[0].parameters["required"] == ["a", "b"]
    assert request.system == "Be brief."
    assert [m.role for m in request.messages] == ["user"]


async def test_000_t6_a_continuation_resends_the_previous_turns_with_their_tool_results() -> None:
    agent = Agent(ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5"), reply("10")]), tools=[add])
    first = await agent.run("2+3?")
    model = agent.provider
    second = await agent.run("times two?", history=first.messages)
    assert isinstance(model, ScriptedProvider)
    resent = model.requests[-1].messages
    assert [m.role for m in resent] == ["user", "assistant", "tool", "assistant", "user"]
    assert resent[2].tool_results[0].content == "5"
    assert second.messages[: len(first.messages)] == first.messages
    assert second.text == "10"


def test_000_t7_the_public_types_are_reachable_from_tether() -> None:
    for name in ("Agent", "Limits", "StopReason", "RunResult", "TurnRecord", "ToolCallRecord", "Tool", "Usage"):
        assert getattr(tether, name).__doc__, name
