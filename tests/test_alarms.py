"""alarms.py: deadlines on one lazily re-armed timer per event loop; Deadline behaves as asyncio.timeout."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tether import Agent, Limits, tool
from tether.alarms import Alarm, Deadline, shared_alarm
from tether.events import LlmEvent, StreamEnd, StreamStart, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart
from tether.loop import engine
from tether.providers.base import ModelInfo, Request
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.usage import NO_USAGE


class CountingLoop:
    """The running loop, counting the timers asked of it (what an Alarm uses: ``call_at`` and ``time``)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.timers = 0

    def call_at(self, when: float, callback: Any, *args: Any) -> asyncio.TimerHandle:
        self.timers += 1
        return self.loop.call_at(when, callback, *args)

    def time(self) -> float:
        return self.loop.time()


async def test_a_deadline_that_passes_cancels_the_block_with_timeout_error() -> None:
    alarm = Alarm(asyncio.get_running_loop())
    with pytest.raises(TimeoutError), Deadline(alarm, 0.01) as deadline:
        await asyncio.sleep(10)
    assert deadline.passed


async def test_a_block_that_ends_in_time_is_left_alone() -> None:
    alarm = Alarm(asyncio.get_running_loop())
    with Deadline(alarm, 10) as deadline:
        await asyncio.sleep(0)
    assert not deadline.passed
    with Deadline(alarm, None):  # no deadline at all
        await asyncio.sleep(0)


async def test_a_cancel_from_elsewhere_stays_a_cancellation() -> None:
    alarm = Alarm(asyncio.get_running_loop())

    async def guarded() -> None:
        with Deadline(alarm, 10):
            await asyncio.sleep(10)

    task = asyncio.create_task(guarded())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_later_deadlines_share_the_armed_timer_and_a_cleared_one_never_fires() -> None:
    counting = CountingLoop()
    alarm = Alarm(counting)  # type: ignore[arg-type]
    fired: list[str] = []
    now = counting.time()
    alarm.set("first", now + 0.02, lambda: fired.append("first"))
    for number in range(50):  # each later than the armed timer: no new timer
        alarm.set(f"later-{number}", now + 60 + number, lambda: fired.append("later"))
        alarm.clear(f"later-{number}")
    assert counting.timers == 1
    alarm.set("cleared", now + 0.01, lambda: fired.append("cleared"))  # earlier: re-armed once
    alarm.clear("cleared")
    assert counting.timers == 2
    alarm.set("second", now + 0.03, lambda: fired.append("second"))
    await asyncio.sleep(0.1)
    assert fired == ["first", "second"]  # the ring found "cleared" gone, fired what was due, re-armed for the rest


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture
async def timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each timer asked of the running loop rings (``call_at``), in the order they were asked for."""
    loop = asyncio.get_running_loop()
    asked: list[float] = []
    original = loop.call_at

    def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        asked.append(when)
        return original(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counted)
    return asked


async def test_a_run_of_many_steps_arms_a_timer_or_two_not_two_a_step(timers: list[float]) -> None:
    """Every provider call and tool call has a deadline (step_timeout, tool_timeout); they share one timer."""
    script = [*(call("add", {"a": n, "b": 1}) for n in range(10)), reply("done")]
    result = await Agent(ScriptedProvider(script), tools=[add], limits=Limits(max_turns=20)).run("go")
    assert result.stop_reason == "complete"
    assert 1 <= len(timers) <= 2  # the step deadline, then once the earlier tool deadline; before: 22


class Forgetful:
    """A provider that keeps nothing of the requests it answers (``ScriptedProvider`` keeps them all)."""

    info = ModelInfo("scripted", "forgetful")

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        self.calls += 1
        yield StreamStart()
        if self.calls == 1:
            yield ToolCallStart("c1", "add", 0)
            yield ToolCallDelta("c1", '{"a": 1, "b": 2}')
            yield ToolCallEnd("c1")
            yield StreamEnd("tool_calls", NO_USAGE)
        else:
            yield TextDelta("3")
            yield StreamEnd("stop", NO_USAGE)


async def test_a_finished_run_is_freed_by_reference_counting() -> None:
    """No reference cycle is left in a finished run: with the collector off, it is gone once its result is."""
    runs: list[weakref.ref[engine.Run]] = []
    made = engine.Run.__init__

    def init(self: engine.Run, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        runs.append(weakref.ref(self))

    agent = Agent(Forgetful(), tools=[add])
    gc.disable()
    try:
        engine.Run.__init__ = init  # type: ignore[method-assign]
        try:
            result = await agent.run("go")
        finally:
            engine.Run.__init__ = made  # type: ignore[method-assign]
        assert result.text == "3"
        assert len(runs) == 1
        assert runs[0]() is None
    finally:
        gc.enable()


# --- the loop's one alarm, shared by every run on it --------------------------------------------------------------


@pytest.mark.parametrize("run_timeout", [None, 600.0], ids=["no-run-deadline", "run-deadline"])
async def test_runs_in_flight_on_one_loop_arm_one_timer_between_them(
    timers: list[float], run_timeout: float | None
) -> None:
    """Every run on a loop keeps its deadlines on the loop's one alarm: twenty runs in flight together, each
    with provider and tool calls under deadlines (and its own run deadline), arm a few timers in all, each for a
    deadline earlier than the armed one. A timer per run (a timer handle, its context and its callback, for the
    collector to walk while the run waits) was twenty or more."""
    script = [call("add", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 1}), reply("done")]
    limits = Limits(run_timeout=run_timeout)
    agents = [Agent(ScriptedProvider(list(script)), tools=[add], limits=limits) for _ in range(20)]
    results = await asyncio.gather(*(agent.run("go") for agent in agents))
    assert [result.text for result in results] == ["done"] * 20
    assert 1 <= len(timers) <= 3  # the run deadline, then the earlier step deadline, then the earlier tool one


class Hanging:
    """A provider that starts its answer and never finishes it."""

    info = ModelInfo("scripted", "hanging")

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        yield StreamStart()
        await asyncio.Event().wait()


async def test_one_run_s_step_deadline_is_its_own_on_the_shared_alarm() -> None:
    """A run that finishes its provider call withdraws its own step deadline, never another run's: the run left
    waiting still times out."""
    hanging = asyncio.create_task(Agent(Hanging(), limits=Limits(step_timeout=0.2)).run("wait"))
    await asyncio.sleep(0)  # the hanging run's call has started, under its deadline
    quick = await Agent(ScriptedProvider([reply("quick")]), limits=Limits(step_timeout=0.2)).run("go")
    assert quick.text == "quick"
    result = await asyncio.wait_for(hanging, 30)
    assert result.stop_reason == "timeout"
    assert "step_timeout" in result.detail


async def test_a_deadline_callback_that_raises_is_reported_and_the_others_still_fire() -> None:
    """Owners share the alarm, so one callback's failure must not cost the others their deadlines."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    alarm = Alarm(loop)
    fired: list[str] = []
    later: asyncio.Future[str] = loop.create_future()

    def broken() -> None:
        raise RuntimeError("a broken callback")

    now = alarm.time()
    alarm.set("broken", now + 0.01, broken)
    alarm.set("sound", now + 0.01, lambda: fired.append("sound"))
    alarm.set("later", now + 0.02, lambda: later.set_result("later"))
    assert await asyncio.wait_for(later, 30) == "later"
    assert fired == ["sound"]
    assert [type(context["exception"]) for context in reported] == [RuntimeError]


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_a_loop_s_alarm_is_one_and_does_not_keep_its_loop_alive(loop_kind: str) -> None:
    """The table of the loops' alarms holds neither a loop nor, through its timer, the alarm's loop: a loop
    whose runs are over (their deadlines withdrawn, its timer still armed for the earliest of them) is freed."""
    new_loop = asyncio.new_event_loop if loop_kind == "asyncio" else pytest.importorskip("uvloop").new_event_loop

    async def a_run_s_deadline_set_and_withdrawn() -> Alarm:
        alarm = shared_alarm(asyncio.get_running_loop())
        alarm.set("call", alarm.time() + 60, lambda: None)
        alarm.clear("call")
        return alarm

    loop = new_loop()
    alarm = loop.run_until_complete(a_run_s_deadline_set_and_withdrawn())
    assert shared_alarm(loop) is alarm
    other = new_loop()
    assert shared_alarm(other) is not alarm
    other.close()
    gone = weakref.ref(loop)
    loop.close()
    del loop, alarm
    gc.collect()
    assert gone() is None
