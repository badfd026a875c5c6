"""Document 003 (an agent-loop specification, in Japanese, for a TypeScript library: run / runStream, the event
order, termination, compaction, the tool-output cache, toolChoice), its implemented behaviour against tether's
public API (docs/conformance.md, section 003)."""

from __future__ import annotations

import asyncio
from typing import Any

from tether import (
    Agent,
    Compaction,
    Done,
    Limits,
    RunCompleted,
    RunEvent,
    StopReason,
    Thinking,
    ToolCall,
    tool,
)
from tether.errors import ProviderUnavailable
from tether.providers import Request, ScriptedProvider, call, fail, parallel, reply
from tether.providers.scripted import Step
from tether.testing import assert_valid_transcript, describe, result_of, run_events
from tether.tools import Allow, Deny


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise ValueError("kaboom")


# --- 3.1 the event order ------------------------------------------------------------------------------------


async def test_003_e01_an_iteration_emits_reasoning_then_text_then_each_calls_events_then_the_final() -> None:
    first = parallel(call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4}), text="Adding.", thinking="Two sums.")
    found = await run_events(Agent(ScriptedProvider([first, reply("3 and 7")]), tools=[add]), "sums?")
    assert [describe(e) for e in found] == [
        "RunStarted",
        "TurnStarted(1)",
        "ThinkingStarted",
        "Thinking('Two sums.')",
        "ThinkingEnded",
        "Text('Adding.')",
        "TurnCompleted(1)",
        "ToolCall(add)",
        "ToolResult(add -> 3)",
        "ToolCall(add)",
        "ToolResult(add -> 7)",
        "TurnStarted(2)",
        "Text('3 and 7')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]


async def test_003_e02_run_is_the_stream_consumed_to_its_one_final_event() -> None:
    agent = Agent(ScriptedProvider.echo())
    streamed = [event async for event in agent.stream("hello")]
    finals = [e for e in streamed if isinstance(e, RunCompleted)]
    assert len(finals) == 1
    assert streamed[-1] is finals[0]
    ran = await agent.run("hello")
    assert (ran.text, ran.stop_reason) == (finals[0].result.text, finals[0].result.stop_reason)


# --- 2.1 the system prompt, 2.2 the loop --------------------------------------------------------------------


async def test_003_l01_the_system_prompt_is_kept_once_however_long_the_conversation() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2"), reply("again 2")])
    agent = Agent(model, tools=[add], system="Be brief.")
    first = await agent.run("1+1?")
    await agent.run("again?", history=first.messages)
    for request in model.requests:
        assert request.system == "Be brief."
        assert all(m.role != "system" for m in request.messages)


async def test_003_l02_the_models_message_joins_the_history_as_it_came_with_its_signature() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}, thinking="Plan.", text="Adding."), reply("2")])
    result = await Agent(model, tools=[add]).run("1+1?")
    assistant = result.messages[1]
    assert [type(p).__name__ for p in assistant.parts] == ["Thinking", "Text", "ToolCall"]
    assert model.requests[1].messages[1] == assistant, "the next request resends the message unchanged"
    assert isinstance(assistant.parts[0], Thinking)
    assert isinstance(assistant.parts[2], ToolCall)


async def test_003_l03_a_terminal_answer_ends_the_run_with_its_text_as_the_final() -> None:
    result = await Agent(ScriptedProvider([reply("All done.")])).run("go")
    assert (result.text, result.stop_reason) == ("All done.", StopReason.COMPLETE)


# --- 2.3 cancellation ---------------------------------------------------------------------------------------


async def test_003_c01_a_run_cancelled_before_it_starts_sends_nothing() -> None:
    model = ScriptedProvider([reply("never")])
    handle = Agent(model).start("go")
    handle.cancel()
    result = await handle
    assert result.stop_reason == StopReason.CANCELLED
    assert model.requests == []


async def test_003_c02_a_cancel_between_a_turn_and_its_tools_runs_no_tool() -> None:
    ran: list[int] = []

    @tool
    def note(n: int) -> str:
        """Note a number."""
        ran.append(n)
        return "noted"

    cancel: list[Any] = []

    def on_event(event: RunEvent) -> None:
        if describe(event) == "TurnCompleted(1)":
            cancel[0].cancel()

    handle = Agent(ScriptedProvider([call("note", {"n": 1})]), tools=[note], on_event=on_event).start("go")
    cancel.append(handle)
    result = await handle
    assert result.stop_reason == StopReason.CANCELLED
    assert ran == [], "the abort is checked before a tool is executed"
    assert_valid_transcript(result)


async def test_003_c03_the_abort_reaches_a_running_tool() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    handle = Agent(ScriptedProvider([call("wait")]), tools=[wait], limits=Limits(tool_timeout=None)).start("go")
    await started.wait()
    handle.cancel()
    result = await handle
    assert cancelled.is_set()
    assert result.stop_reason == StopReason.CANCELLED


# --- 4 tool calls -------------------------------------------------------------------------------------------


async def test_003_t01_an_unknown_tool_is_an_error_message_and_the_loop_goes_on() -> None:
    found = await run_events(Agent(ScriptedProvider([call("nope"), reply("ok")]), tools=[add]), "go")
    result = result_of(found)
    (unknown,) = result.messages[2].tool_results
    assert unknown.is_error
    assert "nope" in unknown.content
    assert "ToolResult(nope -> error:tool_not_found)" in [describe(e) for e in found]
    assert result.stop_reason == StopReason.COMPLETE


async def test_003_t02_unparsable_arguments_keep_their_raw_text_and_reach_a_tool_that_takes_it() -> None:
    seen: list[str] = []

    @tool(raw_arguments=True)
    def run_python(code: str) -> str:
        """Run Python code."""
        seen.append(code)
        return "ran"

    raw = "print('hi')"
    model = ScriptedProvider([call("run_python", raw), reply("ok")])
    result = await Agent(model, tools=[run_python]).run("go")
    assert seen == [raw]
    (made,) = result.messages[1].tool_calls
    assert made.raw_arguments == raw


async def test_003_t03_a_tool_exception_is_an_error_result_event_and_the_loop_goes_on() -> None:
    found = await run_events(Agent(ScriptedProvider([call("explode"), reply("it failed")]), tools=[explode]), "go")
    result = result_of(found)
    (failed,) = result.messages[2].tool_results
    assert failed.is_error
    assert "kaboom" in failed.content
    assert "ToolResult(explode -> error:tool_failed)" in [describe(e) for e in found]
    assert result.text == "it failed"


async def test_003_t04_a_done_tool_ends_the_run_with_its_message_kept_in_the_history() -> None:
    @tool
    def finish(summary: str) -> str:
        """Finish the task."""
        raise Done(summary)

    @tool
    def finish_by_value(summary: str) -> Done:
        """Finish the task, by returning."""
        return Done(summary)

    raised = await Agent(ScriptedProvider([call("finish", {"summary": "Task done."})]), tools=[finish]).run("go")
    assert (raised.stop_reason, raised.text) == (StopReason.DONE_TOOL, "Task done.")
    (kept,) = raised.messages[-1].tool_results
    assert kept.name == "finish"
    returned = await Agent(
        ScriptedProvider([call("finish_by_value", {"summary": "Also done."})]), tools=[finish_by_value]
    ).run("go")
    assert (returned.stop_reason, returned.text) == (StopReason.DONE_TOOL, "Also done.")


async def test_003_t05_a_permission_hook_decides_each_call_before_it_runs() -> None:
    def can_use_tool(made: ToolCall) -> Allow | Deny:
        return Deny("not today") if (made.arguments or {}).get("a") == 13 else Allow()

    turn = parallel(call("add", {"a": 13, "b": 1}), call("add", {"a": 1, "b": 1}))
    result = await Agent(ScriptedProvider([turn, reply("ok")]), tools=[add], can_use_tool=can_use_tool).run("go")
    denied, allowed = result.messages[2].tool_results
    assert denied.is_error
    assert "not today" in denied.content
    assert allowed.content == "2"


# --- 6 the iteration limit ----------------------------------------------------------------------------------


async def test_003_m01_at_the_limit_a_summary_is_asked_with_tools_off_on_a_copy_of_the_history() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("It is 2.")])
    result = await Agent(model, tools=[add], limits=Limits(max_turns=1)).run("1+1?")
    summary = model.requests[-1]
    assert summary.tool_choice == "none"
    assert summary.messages[-1].role == "user"
    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.text == "It is 2."
    assert all(m.text != summary.messages[-1].text for m in result.messages), "the request is not kept"


async def test_003_m02_a_failing_summary_call_gives_a_fixed_fallback_text() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), fail(ProviderUnavailable("down"))])
    result = await Agent(model, tools=[add], limits=Limits(max_turns=1)).run("1+1?")
    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.degraded
    assert "turn limit" in result.text


# --- 1.1 the options: compaction and the tool-output cache on by default, toolChoice --------------------------


async def test_003_o01_compaction_is_on_by_default_and_fires_between_turns() -> None:
    assert Compaction().enabled

    @tool
    def fetch(n: int) -> str:
        """Fetch item n."""
        return f"item {n}: " + "lorem ipsum dolor sit amet " * 25

    fetched = [0]

    def respond(request: Request) -> Step:
        if request.tool_choice == "none" or not request.tools:  # the summary call is made with tools off
            return reply("SUMMARY: items were fetched.")
        fetched[0] += 1
        return reply("all fetched") if fetched[0] > 30 else call("fetch", {"n": fetched[0]})

    model = ScriptedProvider([respond], repeat_last=True, context_window=4000)
    found = await run_events(Agent(model, tools=[fetch], limits=Limits(max_turns=40)), "fetch the items")
    kinds = [e.kind for e in found]
    assert "compacted" in kinds
    for index, kind in enumerate(kinds):
        if kind == "compacted":
            assert kinds[index + 1] == "turn_started"
    assert result_of(found).stop_reason == StopReason.COMPLETE


async def test_003_o02_the_tool_output_cache_is_on_by_default_for_long_outputs() -> None:
    long = "\n".join(f"line {n}" for n in range(20_000))

    @tool
    def dump() -> str:
        """Dump a lot."""
        return long

    model = ScriptedProvider([call("dump"), reply("ok")])
    await Agent(model, tools=[dump]).run("go")
    (shown,) = model.requests[1].messages[-1].tool_results
    assert len(shown.content) < len(long)
    assert "read_tool_output" in [t.name for t in model.requests[1].tools]


async def test_003_o03_tool_choice_is_sent_and_none_offers_no_call() -> None:
    model = ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2")])
    await Agent(model, tools=[add], tool_choice="required").run("go")
    assert [r.tool_choice for r in model.requests] == ["required", "auto"]
    plain = ScriptedProvider([reply("no tools")])
    await Agent(plain, tools=[add], tool_choice="none").run("go")
    assert plain.requests[0].tool_choice == "none"


async def test_003_o04_usage_is_tracked_for_every_run() -> None:
    result = await Agent(ScriptedProvider([reply("hi")])).run("go")
    assert result.usage.requests == 1
    assert result.usage.output_tokens > 0
