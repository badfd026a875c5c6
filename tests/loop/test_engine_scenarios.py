"""The loop, scenario by scenario, with the exact event sequence each one produces (ARCHITECTURE.md §4)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from tests.helpers import assert_valid, describe, result_of, run_events
from tether import Agent, Done, ToolError, tool
from tether.errors import InvalidResponse, RateLimited
from tether.events import (
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    TurnCompleted,
)
from tether.messages import ToolCall, ToolResult
from tether.providers.base import Request
from tether.providers.scripted import (
    ScriptedProvider,
    call,
    cut_off,
    empty,
    events,
    fail,
    parallel,
    reply,
)
from tether.usage import Usage


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def test_text_only_answer_completes_with_its_events_in_order() -> None:
    agent = Agent(ScriptedProvider([reply("Hello there", chunk_size=5)]))
    events_ = await run_events(agent, "hi")
    assert [describe(e) for e in events_] == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('Hello')",
        "Text(' ther')",
        "Text('e')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    result = result_of(events_)
    assert result.text == "Hello there"
    assert not result.degraded
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_single_tool_call_runs_the_tool_and_feeds_the_result_back() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    events_ = await run_events(Agent(model, tools=[add]), "2+3?")
    assert [describe(e) for e in events_] == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(add)",
        "ToolResult(add -> 5)",
        "TurnStarted(2)",
        "Text('5')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    result = result_of(events_)
    assert result.text == "5"
    assert result.turns == 2
    second_request = model.requests[1]
    assert second_request.messages[-1].tool_results == (ToolResult("call_1", "add", "5"),)
    assert_valid(result)


async def test_a_turn_with_two_tool_calls_completes_before_its_tool_events() -> None:
    """``TurnCompleted`` comes when the model's message is complete, with its usage, and the tool events of
    the calls it asked for follow it, call by call in the model's order."""
    usage = Usage(input_tokens=40, output_tokens=7)
    first = parallel(call("add", {"a": 1, "b": 2}), call("multiply", {"a": 3, "b": 4}), text="Both.", usage=usage)
    model = ScriptedProvider([first, reply("3 and 12")])
    events_ = await run_events(Agent(model, tools=[add, multiply]), "sums?")
    assert [describe(e) for e in events_] == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('Both.')",
        "TurnCompleted(1)",
        "ToolCall(add)",
        "ToolResult(add -> 3)",
        "ToolCall(multiply)",
        "ToolResult(multiply -> 12)",
        "TurnStarted(2)",
        "Text('3 and 12')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    completed = next(e for e in events_ if isinstance(e, TurnCompleted))
    assert [c.name for c in completed.message.tool_calls] == ["add", "multiply"]
    assert completed.usage == usage
    assert completed.status == "completed"


def test_the_issue_example_runs_synchronously() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    result = Agent(model, tools=[add]).run_sync("2+3?")
    assert result.text == "5"
    assert result.stop_reason == "complete"


async def test_multi_turn_tool_loop_chains_results() -> None:
    model = ScriptedProvider(
        [call("add", {"a": 2, "b": 3}), call("multiply", {"a": 5, "b": 4}), reply("20", thinking="5*4")]
    )
    result = await Agent(model, tools=[add, multiply], system="Be brief.").run("(2+3)*4?")
    assert result.text == "20"
    assert result.turns == 3
    assert [m.role for m in result.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert result.messages[-1].parts[0].kind == "thinking"
    assert all(r.system == "Be brief." for r in model.requests)
    assert_valid(result)


async def test_parallel_calls_of_concurrent_tools_run_together_and_answer_in_model_order() -> None:
    both_running = asyncio.Barrier(2)

    @tool(concurrent=True)
    async def slow_echo(text: str) -> str:
        """Echo after the other call has started too."""
        async with asyncio.timeout(5):  # fails instead of hanging if the calls ran one by one
            await both_running.wait()
        return text

    model = ScriptedProvider(
        [parallel(call("slow_echo", {"text": "first"}), call("slow_echo", {"text": "second"})), reply("ok")]
    )
    events_ = await run_events(Agent(model, tools=[slow_echo]), "go")
    assert [describe(e) for e in events_][2:7] == [
        "TurnCompleted(1)",
        "ToolCall(slow_echo)",
        "ToolCall(slow_echo)",
        "ToolResult(slow_echo -> first)",
        "ToolResult(slow_echo -> second)",
    ]
    result = result_of(events_)
    assert [r.content for r in result.messages[2].tool_results] == ["first", "second"]


async def test_parallel_calls_of_ordinary_tools_run_one_after_the_other_in_model_order() -> None:
    order: list[str] = []

    @tool
    def record(name: str) -> str:
        """Record a name."""
        order.append(name)
        return name

    calls = [call("record", {"name": n}) for n in ("a", "b", "c")]
    model = ScriptedProvider([parallel(*calls), reply("done")])
    events_ = await run_events(Agent(model, tools=[record]), "go")
    assert order == ["a", "b", "c"]
    assert [describe(e) for e in events_][3:9] == [
        "ToolCall(record)",
        "ToolResult(record -> a)",
        "ToolCall(record)",
        "ToolResult(record -> b)",
        "ToolCall(record)",
        "ToolResult(record -> c)",
    ]


async def test_invalid_json_arguments_become_an_error_result_and_the_loop_continues() -> None:
    model = ScriptedProvider([call("add", '{"a": 2, "b": '), reply("sorry")])
    result = await Agent(model, tools=[add]).run("2+?")
    (error,) = result.messages[2].tool_results
    assert error.is_error
    assert error.code == "invalid_arguments"
    assert '{"a": 2, "b": ' in error.content
    assert result.text == "sorry"
    assert result.stop_reason == "complete"


async def test_arguments_that_fail_validation_name_the_field() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": "three"}), reply("ok")])
    result = await Agent(model, tools=[add]).run("2+three?")
    (error,) = result.messages[2].tool_results
    assert error.code == "invalid_arguments"
    assert "- b:" in error.content


async def test_unknown_tool_gets_an_error_listing_the_available_tools() -> None:
    model = ScriptedProvider([call("subtract", {"a": 1}), reply("ok")])
    events_ = await run_events(Agent(model, tools=[add, multiply]), "go")
    assert "ToolResult(subtract -> error:tool_not_found)" in [describe(e) for e in events_]
    (error,) = result_of(events_).messages[2].tool_results
    assert "add, multiply" in error.content
    assert result_of(events_).stop_reason == "complete"


async def test_the_hosts_words_answer_a_call_of_a_tool_not_offered_and_a_failing_host_gets_tethers() -> None:
    seen: list[tuple[str, list[str]]] = []

    def unknown(call: ToolCall, offered: Sequence[str]) -> str:
        seen.append((call.name, list(offered)))
        if call.name == "broken":
            raise RuntimeError("the host's words failed")
        return f'{{"ok": false, "error": "no {call.name}"}}'

    model = ScriptedProvider([call("subtract", {"a": 1}), call("broken"), reply("ok")])
    result = await Agent(model, tools=[add, multiply], deny=["multiply"], unknown_tool=unknown).run("go")

    answered, fallback = result.messages[2].tool_results[0], result.messages[4].tool_results[0]
    assert (answered.content, answered.is_error, answered.code) == (
        '{"ok": false, "error": "no subtract"}', True, "tool_not_found",
    )  # fmt: skip
    assert (fallback.content, fallback.code) == ("Unknown tool 'broken'. Available tools: add.", "tool_not_found")
    assert seen == [("subtract", ["add"]), ("broken", ["add"])], "only the tools offered are named"
    assert result.stop_reason == "complete"


async def test_tool_exception_becomes_an_error_result_with_type_and_message() -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    model = ScriptedProvider([call("broken"), reply("it failed")])
    events_ = await run_events(Agent(model, tools=[broken]), "go")
    received = [e for e in events_ if describe(e).startswith("ToolResult")]
    (error,) = result_of(events_).messages[2].tool_results
    assert error.code == "tool_failed"
    assert error.content == "Tool 'broken' failed: ValueError: disk on fire"
    assert isinstance(getattr(received[0], "exception", None), ValueError)
    assert result_of(events_).text == "it failed"


async def test_tool_error_sends_its_plain_message() -> None:
    @tool
    def picky(n: int) -> int:
        """Wants an even number."""
        raise ToolError(f"{n} is odd; pass an even number")

    result = await Agent(ScriptedProvider([call("picky", {"n": 3}), reply("ok")]), tools=[picky]).run("go")
    (error,) = result.messages[2].tool_results
    assert error.content == "3 is odd; pass an even number"
    assert error.code == "tool_failed"


async def test_empty_answer_is_retried_once_with_a_correction_then_accepted() -> None:
    model = ScriptedProvider([empty(), reply("here it is")])
    events_ = await run_events(Agent(model), "go")
    assert [describe(e) for e in events_] == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 invalid_response -> retry)",
        "TurnStarted(1 attempt=2)",
        "Text('here it is')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    correction = model.requests[1].messages[-1]
    assert correction.role == "user"
    assert "empty" in correction.text
    result = result_of(events_)
    assert [m.role for m in result.messages] == ["user", "assistant"], "the correction is not stored"
    assert result.usage.requests == 2


async def test_empty_answers_beyond_the_retries_stop_as_invalid_response_with_a_degraded_text() -> None:
    model = ScriptedProvider([empty(), empty()])
    result = await Agent(model).run("go")
    assert result.stop_reason == "invalid_response"
    assert result.degraded
    assert "no usable answer after 2 attempts" in result.text
    assert [m.role for m in result.messages] == ["user"]
    model.assert_consumed()


async def test_tool_call_cut_off_at_the_output_limit_is_never_executed() -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> int:
        """Record a number."""
        ran.append(n)
        return n

    model = ScriptedProvider([cut_off(call("record", {"n": 12345678})), call("record", {"n": 1}), reply("ok")])
    result = await Agent(model, tools=[record]).run("go")
    assert ran == [1]
    assert "cut off" in model.requests[1].messages[-1].text
    assert result.text == "ok"
    assert_valid(result)


async def test_malformed_stream_is_treated_as_an_unusable_answer_and_retried() -> None:
    model = ScriptedProvider([fail(InvalidResponse("bad SSE chunk"), after_text="par"), reply("fine")])
    result = await Agent(model).run("go")
    assert result.text == "fine"
    assert "bad SSE chunk" in model.requests[1].messages[-1].text


async def test_done_tool_ends_the_run_with_its_message_and_skips_later_calls() -> None:
    ran: list[str] = []

    @tool
    def finish(answer: str) -> str:
        """Give the final answer."""
        raise Done(answer)

    @tool
    def other() -> str:
        """Something else."""
        ran.append("other")
        return "x"

    model = ScriptedProvider([parallel(call("finish", {"answer": "42"}), call("other"))])
    events_ = await run_events(Agent(model, tools=[finish, other]), "go")
    result = result_of(events_)
    assert result.stop_reason == "done_tool"
    assert result.text == "42"
    assert not result.degraded
    assert ran == []
    finish_result, other_result = result.messages[-1].tool_results
    assert finish_result.content == "42"
    assert not finish_result.is_error
    assert other_result.code == "cancelled"
    assert_valid(result)


async def test_done_returned_instead_of_raised_also_ends_the_run() -> None:
    @tool
    async def finish() -> Done:
        """Finish."""
        return Done("all done")

    result = await Agent(ScriptedProvider([call("finish")]), tools=[finish]).run("go")
    assert result.stop_reason == "done_tool"
    assert result.text == "all done"


async def test_provider_error_stops_the_run_with_the_error_and_the_partial_text() -> None:
    model = ScriptedProvider([fail(RateLimited("slow down", status=429), after_text="Part of an answer")])
    result = await Agent(model).run("go")
    assert result.stop_reason == "error"
    assert isinstance(result.error, RateLimited)
    assert result.degraded
    assert result.text == "Part of an answer"
    assert "rate_limited" in result.detail


async def test_a_script_that_runs_out_stops_the_run_with_a_clear_error() -> None:
    result = await Agent(ScriptedProvider([call("add", {"a": 1, "b": 1})]), tools=[add]).run("go")
    assert result.stop_reason == "error"
    assert "called 2 times but its script has 1 step" in str(result.error)
    assert_valid(result)


async def test_text_deltas_reach_the_consumer_before_the_turn_ends() -> None:
    release = asyncio.Event()

    async def held_back(request: Request) -> AsyncIterator[LlmEvent]:
        yield StreamStart()
        yield TextDelta("first ")
        await release.wait()
        yield TextDelta("second")
        yield StreamEnd("stop", Usage())

    class Gated(ScriptedProvider):
        def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
            return held_back(request)

    stream = Agent(Gated([])).stream("go")
    seen = []
    async for event in stream:
        seen.append(describe(event))
        if event == TextDelta("first "):
            assert not release.is_set()  # the provider is still holding the rest of its turn
            release.set()
    assert seen[2:5] == ["Text('first ')", "Text('second')", "TurnCompleted(1)"]


async def test_usage_is_summed_over_turns_and_kept_per_turn_with_cost_from_a_known_price() -> None:
    model = ScriptedProvider(
        [
            call("add", {"a": 1, "b": 2}, usage=Usage(input_tokens=100, output_tokens=10)),
            reply("3", usage=Usage(input_tokens=1_000_000, output_tokens=1_000_000)),
        ],
        model="gpt-4o-mini",
    )
    result = await Agent(model, tools=[add]).run("1+2")
    assert result.turn_usage == (
        Usage(input_tokens=100, output_tokens=10, requests=1),
        Usage(input_tokens=1_000_000, output_tokens=1_000_000, requests=1),
    )
    assert result.usage == Usage(input_tokens=1_000_100, output_tokens=1_000_010, requests=2)
    assert result.cost is not None
    assert abs(result.cost.total_usd - (1_000_100 * 0.15 + 1_000_010 * 0.60) / 1e6) < 1e-9


async def test_cost_is_none_for_a_model_without_a_known_price() -> None:
    result = await Agent(ScriptedProvider([reply("x")], model="my-own-model")).run("go")
    assert result.cost is None
    assert result.usage.output_tokens > 0


async def test_the_event_sink_sees_every_event_without_streaming() -> None:
    seen: list[str] = []
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    result = await Agent(model, tools=[add], on_event=lambda e: seen.append(describe(e))).run("2+3?")
    assert seen[0] == "RunStarted"
    assert seen[-1] == "RunCompleted(complete)"
    assert "ToolResult(add -> 5)" in seen
    assert result.text == "5"


async def test_a_sink_that_raises_stops_the_run_with_its_error_and_still_completes() -> None:
    def bad_sink(event: object) -> None:
        if describe(event).startswith("ToolResult"):  # type: ignore[arg-type]
            raise KeyError("sink bug")

    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])
    events_ = await run_events(Agent(model, tools=[add], on_event=bad_sink), "2+3?")
    result = result_of(events_)
    assert result.stop_reason == "error"
    assert isinstance(result.error, KeyError)
    assert "event sink" in result.detail
    assert_valid(result)


async def test_raw_events_with_calls_interleaved_by_id_are_assembled_and_run() -> None:
    model = ScriptedProvider(
        [
            events(
                ToolCallStart("x", "add", 0),
                ToolCallStart("y", "multiply", 1),
                ToolCallDelta("x", '{"a": 1,'),
                ToolCallDelta("y", '{"a": 2,'),
                ToolCallDelta("y", ' "b": 3}'),
                ToolCallDelta("x", ' "b": 4}'),
                StreamEnd("tool_calls", Usage()),
            ),
            reply("done"),
        ]
    )
    result = await Agent(model, tools=[add, multiply]).run("go")
    assert [(r.call_id, r.content) for r in result.messages[2].tool_results] == [("x", "5"), ("y", "6")]
