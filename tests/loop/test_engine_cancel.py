"""Cancellation (loop/interrupts.py): mid-stream, mid-tool, after the turn, from outside; always a result."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from tests.helpers import assert_valid, check_order, describe
from tether import Agent, Limits, tool
from tether.events import RunCompleted, RunEvent, TextDelta, ToolCallStarted, TurnStarted
from tether.loop.accumulator import AccumulatedTurn
from tether.loop.executor import ToolBatch, _Plan
from tether.providers.scripted import ScriptedProvider, call, hang, parallel, reply


def other_tasks() -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


async def test_cancel_mid_stream_returns_a_cancelled_result_with_the_partial_text() -> None:
    first_text = asyncio.Event()
    events: list[RunEvent] = []

    def observe(event: RunEvent) -> None:
        events.append(event)
        if isinstance(event, TextDelta):
            first_text.set()

    model = ScriptedProvider([hang("Thinking about it")])
    agent = Agent(model, on_event=observe)
    before = other_tasks()
    handle = agent.start("go")
    await first_text.wait()
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert result.degraded
    assert result.text == "Thinking about it"
    check_order(events)
    assert [m.role for m in result.messages] == ["user"], "the unfinished turn is not stored"
    assert result.usage.requests == 1
    assert other_tasks() <= before


async def test_cancel_mid_tool_cancels_the_tool_and_answers_every_call() -> None:
    tool_started = asyncio.Event()
    tool_cancelled = asyncio.Event()

    @tool
    async def long_job(n: int) -> str:
        """Takes forever."""
        tool_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            tool_cancelled.set()
            raise
        return "unreachable"

    @tool
    def quick() -> str:
        """Quick."""
        return "quick done"

    model = ScriptedProvider([parallel(call("quick"), call("long_job", {"n": 1}), call("long_job", {"n": 2}))])
    events: list[RunEvent] = []
    before = other_tasks()
    handle = Agent(model, tools=[long_job, quick], limits=Limits(tool_timeout=None), on_event=events.append).start("go")
    await tool_started.wait()
    handle.cancel()
    result = await handle
    assert tool_cancelled.is_set()
    assert result.stop_reason == "cancelled"
    quick_result, cancelled_one, never_started = result.messages[-1].tool_results
    assert quick_result.content == "quick done"
    assert cancelled_one.code == "cancelled"
    assert never_started.code == "cancelled"
    assert_valid(result)
    assert [describe(e) for e in events][-2:] == ["ToolResult(long_job -> error:cancelled)", "RunCompleted(cancelled)"]
    assert other_tasks() <= before


async def test_cancel_during_concurrent_tools_cancels_all_of_them() -> None:
    running = asyncio.Barrier(3)
    cancelled: list[int] = []

    @tool(concurrent=True)
    async def wait(n: int) -> str:
        """Waits."""
        await running.wait()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(n)
            raise
        return "unreachable"

    model = ScriptedProvider([parallel(call("wait", {"n": 1}), call("wait", {"n": 2}))])
    events: list[RunEvent] = []
    handle = Agent(model, tools=[wait], limits=Limits(tool_timeout=None), on_event=events.append).start("go")
    await running.wait()
    handle.cancel()
    result = await handle
    assert sorted(cancelled) == [1, 2]
    assert [r.code for r in result.messages[-1].tool_results] == ["cancelled", "cancelled"]
    check_order(events)


async def test_cancel_while_a_sync_tool_runs_abandons_its_thread_and_returns_at_once() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    def blocking() -> str:
        """Blocks its thread."""
        started.set()
        release.wait(10)
        return "late"

    handle = Agent(ScriptedProvider([call("blocking")]), tools=[blocking]).start("go")
    await asyncio.to_thread(started.wait, 10)
    handle.cancel()
    try:
        result = await handle
        assert not release.is_set(), "the run returned while the thread was still blocked"
    finally:
        release.set()
    assert result.stop_reason == "cancelled"
    assert result.messages[-1].tool_results[0].code == "cancelled"


async def test_cancel_before_the_run_starts_still_completes_the_run() -> None:
    model = ScriptedProvider([reply("never sent")])
    events: list[RunEvent] = []
    handle = Agent(model, on_event=events.append).start("go")
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert model.requests == []
    assert "cancelled" in result.text
    assert [describe(e) for e in events] == ["RunStarted", "RunCompleted(cancelled)"]


async def test_cancel_after_turn_lets_the_turn_and_its_tools_finish() -> None:
    tool_started = asyncio.Event()
    go_on = asyncio.Event()

    @tool
    async def step() -> str:
        """One step."""
        tool_started.set()
        await go_on.wait()
        return "step done"

    model = ScriptedProvider([call("step"), reply("never asked")])
    handle = Agent(model, tools=[step]).start("go")
    await tool_started.wait()
    handle.cancel(after_turn=True)
    go_on.set()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert result.messages[-1].tool_results[0].content == "step done"
    assert len(model.requests) == 1


async def test_cancel_from_another_thread_is_delivered() -> None:
    first_text = threading.Event()
    model = ScriptedProvider([hang("streaming")])
    stream = Agent(model, on_event=lambda e: first_text.set() if isinstance(e, TextDelta) else None).stream("go")

    def cancel_when_text_arrives() -> None:
        first_text.wait(10)
        stream.cancel()

    canceller = threading.Thread(target=cancel_when_text_arrives)
    canceller.start()
    events = [event async for event in stream]
    canceller.join()
    last = events[-1]
    assert isinstance(last, RunCompleted)
    assert last.result.stop_reason == "cancelled"


async def test_stream_cancel_from_the_consumer_loop_ends_with_run_completed() -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    stream = Agent(ScriptedProvider([call("noop"), reply("unused")]), tools=[noop]).stream("go")
    seen: list[str] = []
    async for event in stream:
        seen.append(describe(event))
        if isinstance(event, ToolCallStarted):
            stream.cancel()
    assert seen[-1] == "RunCompleted(cancelled)"
    assert stream.result is not None
    assert_valid(stream.result)


async def test_leaving_the_stream_early_closes_the_run_and_tells_the_sink() -> None:
    completed: list[RunCompleted] = []
    model = ScriptedProvider([hang("tokens")])
    agent = Agent(model, on_event=lambda e: completed.append(e) if isinstance(e, RunCompleted) else None)
    stream = agent.stream("go")
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()
    assert completed[0].result.stop_reason == "cancelled"
    assert completed[0].result.text == "tokens"


async def test_a_host_cancelling_the_driving_task_gets_cancelled_error_not_a_result() -> None:
    started = asyncio.Event()
    completed: list[RunCompleted] = []

    @tool
    async def wait() -> str:
        """Waits."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    agent = Agent(
        ScriptedProvider([call("wait")]),
        tools=[wait],
        limits=Limits(tool_timeout=None),
        on_event=lambda e: completed.append(e) if isinstance(e, RunCompleted) else None,
    )
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (done,) = completed
    assert done.result.stop_reason == "cancelled"
    assert_valid(done.result)


async def test_asyncio_timeout_around_a_run_still_raises_timeout_error() -> None:
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await Agent(ScriptedProvider([hang()])).run("go")


async def test_cancel_after_the_run_finished_is_harmless() -> None:
    handle = Agent(ScriptedProvider([reply("done")])).start("go")
    result = await handle
    handle.cancel()
    assert result.stop_reason == "complete"
    assert handle.done()


async def test_a_run_waiting_for_its_next_answer_keeps_nothing_of_the_turn_before() -> None:
    """A run's turns share one generator frame: the last turn's answer, its batch of calls and their plans must not
    stay alive in it while the run waits (each would be one more object per run in flight for the collector)."""

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    second_turn = asyncio.Event()

    def observe(event: RunEvent) -> None:
        if isinstance(event, TurnStarted) and event.turn == 2:
            second_turn.set()

    arguments = {"a": 7_412_309, "b": 2_958_761}  # this run's own: other tests' objects may still be alive
    agent = Agent(ScriptedProvider([call("add", arguments), hang()]), tools=[add])
    handle = agent.start("add them", on_event=observe)
    await second_turn.wait()
    await asyncio.sleep(0)  # the run is now waiting for its second answer

    def of_this_run(obj: object) -> bool:
        if isinstance(obj, AccumulatedTurn):
            return any(call.arguments == arguments for call in obj.tool_calls)
        if isinstance(obj, ToolBatch):
            return any(call.arguments == arguments for call in obj.calls)
        return isinstance(obj, _Plan) and obj.call.arguments == arguments

    gc.collect()  # only what is still reachable counts
    kept = [type(obj).__name__ for obj in gc.get_objects() if of_this_run(obj)]
    handle.cancel()
    assert (await handle).stop_reason == "cancelled"
    assert kept == []
