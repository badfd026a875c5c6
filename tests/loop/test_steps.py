"""The step seam (``loop/steps.py``): each provider call and tool call is a step a runner can keep and replay."""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tests.e2e.mock_llm import Fail, MockLLM, Say
from tether import Agent, Limits, tool
from tether.agent import stream_with_steps
from tether.events import ProviderRetry, RunCompleted, RunEvent, RunResult, TextDelta
from tether.loop.steps import RUN_STARTED, StepRunner
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.run_handles import RunStream

T = TypeVar("T")


class MemoryRunner:
    """Keeps each step's result (pickled, as an engine would) by position; a later execution replays them.

    ``stop_after``: raise ``KeyboardInterrupt`` (a dying process) when that step starts, before it runs."""

    def __init__(self, run_id: str = "run-1") -> None:
        self._run_id = run_id
        self.kept: list[tuple[str, bytes]] = []
        self.position = 0
        self.ran: list[str] = []
        self.die_at: str | None = None

    @property
    def run_id(self) -> str:
        return self._run_id

    def again(self) -> MemoryRunner:
        """The same run's store, for its next execution."""
        runner = MemoryRunner(self._run_id)
        runner.kept = self.kept
        return runner

    async def step(self, name: str, function: Callable[[], Awaitable[T]]) -> T:
        position, self.position = self.position, self.position + 1
        if position < len(self.kept):
            kept_name, data = self.kept[position]
            assert kept_name == name, f"step {position} was {kept_name!r}, now {name!r}"
            value: T = pickle.loads(data)
            return value
        if name == self.die_at:
            raise KeyboardInterrupt(name)
        self.ran.append(name)
        value = await function()
        self.kept.append((name, pickle.dumps(value)))
        return value


async def finish(stream: RunStream) -> RunResult:
    result = None
    async for event in stream:
        if isinstance(event, RunCompleted):
            result = event.result
    assert result is not None
    return result


def _runner_is_a_step_runner(runner: MemoryRunner) -> StepRunner:
    return runner  # mypy checks the protocol


LOG: list[str] = []


@tool
def note(text: str) -> str:
    """Write a note."""
    LOG.append(text)
    return f"noted {text}"


@tool(idempotent=False)
def pay(amount: int) -> str:
    """Pay an amount."""
    LOG.append(f"paid {amount}")
    return "paid"


def _script() -> list[Any]:
    return [call("note", {"text": "a"}, id="c1"), call("note", {"text": "b"}, id="c2"), reply("all noted")]


async def test_a_run_with_a_runner_takes_each_call_as_a_named_step_and_uses_its_run_id() -> None:
    LOG.clear()
    runner = MemoryRunner("wf-42")
    events: list[RunEvent] = []
    agent = Agent(ScriptedProvider(_script()), tools=[note])
    result = await finish(stream_with_steps(agent, "go", _runner_is_a_step_runner(runner), on_event=events.append))
    assert result.text == "all noted"
    assert result.run_id == "wf-42"
    assert runner.ran == ["model:1.1", "tool:note:c1", "model:2.1", "tool:note:c2", "model:3.1"]
    assert LOG == ["a", "b"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["all noted"]


async def test_a_replayed_run_calls_neither_the_model_nor_the_tools_again_and_gives_the_same_result() -> None:
    LOG.clear()
    first = MemoryRunner()
    plain = await finish(stream_with_steps(Agent(ScriptedProvider(_script()), tools=[note]), "go", first))
    provider = ScriptedProvider([])  # any call would fail: the script is empty
    replayed: list[RunEvent] = []
    again = await finish(
        stream_with_steps(Agent(provider, tools=[note]), "go", first.again(), on_event=replayed.append)
    )
    assert LOG == ["a", "b"]
    assert again.text == plain.text
    assert again.messages == plain.messages
    assert again.usage == plain.usage
    assert [e.text for e in replayed if isinstance(e, TextDelta)] == ["all noted"]


async def test_recovery_continues_after_the_last_finished_step() -> None:
    LOG.clear()
    first = MemoryRunner()
    first.die_at = "tool:note:c2"
    with contextlib.suppress(KeyboardInterrupt):
        await finish(stream_with_steps(Agent(ScriptedProvider(_script()), tools=[note]), "go", first))
    assert LOG == ["a"]
    second = first.again()
    script = ScriptedProvider([reply("all noted")])  # only the call that had not finished is made again
    result = await finish(stream_with_steps(Agent(script, tools=[note]), "go", second))
    assert LOG == ["a", "b"]
    assert second.ran == ["tool:note:c2", "model:3.1"]
    assert result.text == "all noted"


async def test_an_interrupted_call_of_a_tool_not_safe_to_repeat_is_answered_with_an_error_not_run_again() -> None:
    LOG.clear()
    first = MemoryRunner()
    first.die_at = "tool:pay:p1"  # its start was kept, its end was not: the process died while it ran
    script = [call("pay", {"amount": 5}, id="p1"), reply("done")]
    with contextlib.suppress(KeyboardInterrupt):
        await finish(stream_with_steps(Agent(ScriptedProvider(script), tools=[pay]), "pay", first))
    second = first.again()
    result = await finish(stream_with_steps(Agent(ScriptedProvider([reply("done")]), tools=[pay]), "pay", second))
    assert LOG == []
    answer = result.messages[-2].parts[0]
    assert isinstance(answer, ToolResult)
    assert answer.is_error
    assert answer.code == "tool_failed"
    assert "may or may not have happened" in answer.content
    third = await finish(stream_with_steps(Agent(ScriptedProvider([]), tools=[pay]), "pay", second.again()))
    assert third.messages == result.messages  # the error answer is kept like any result


async def test_a_tool_not_safe_to_repeat_runs_once_when_nothing_interrupts_it() -> None:
    LOG.clear()
    runner = MemoryRunner()
    script = [call("pay", {"amount": 5}, id="p1"), reply("done")]
    result = await finish(stream_with_steps(Agent(ScriptedProvider(script), tools=[pay]), "pay", runner))
    assert LOG == ["paid 5"]
    assert result.text == "done"
    assert runner.ran == ["model:1.1", "tool:pay:p1:started", "tool:pay:p1", "model:2.1"]
    await finish(stream_with_steps(Agent(ScriptedProvider([]), tools=[pay]), "pay", runner.again()))
    assert LOG == ["paid 5"]


async def test_calls_read_from_json_actions_get_the_same_ids_when_the_run_is_executed_again() -> None:
    LOG.clear()
    action = '{"type": "tool_call", "name": "note", "arguments": {"text": "a"}}'
    first = MemoryRunner()
    script = [reply(action), reply('{"type": "final", "text": "noted"}')]
    result = await finish(
        stream_with_steps(Agent(ScriptedProvider(script), tools=[note], tool_mode="json"), "go", first)
    )
    tool_steps = [name for name in first.ran if name.startswith("tool:")]
    assert len(tool_steps) == 1
    again = first.again()  # the steps are named by call id: a replay checks every name against the kept one
    replayed = await finish(stream_with_steps(Agent(ScriptedProvider([]), tools=[note], tool_mode="json"), "go", again))
    assert replayed.messages == result.messages
    assert LOG == ["a"]


async def test_a_run_with_a_deadline_keeps_its_start_as_a_step_and_a_later_execution_gets_only_what_is_left() -> None:
    """``run:started`` is the first step of a run with a ``run_timeout``; an execution of the run that finds it
    kept 100 s ago, with a deadline of 100.5 s, stops on the deadline within what is left of it (without it, the
    run would wait a whole fresh deadline in its tool)."""

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "unreachable"

    limits = Limits(run_timeout=100.5, tool_timeout=None)
    first = MemoryRunner()
    await finish(stream_with_steps(Agent(ScriptedProvider([reply("hi")]), limits=limits), "go", first))
    assert first.ran[0] == RUN_STARTED
    later = MemoryRunner()
    later.kept = [(RUN_STARTED, pickle.dumps(time.time() - 100.0))]
    agent = Agent(ScriptedProvider([call("wait_forever")]), tools=[wait_forever], limits=limits)
    result = await asyncio.wait_for(finish(stream_with_steps(agent, "go", later)), 30.0)
    assert result.stop_reason == "timeout"
    assert "run_timeout" in result.detail
    assert later.ran[0] == "model:1.1"  # the start was not taken again


class SleepingRunner(MemoryRunner):
    """A runner with a durable sleep (``steps.py``): each wait it is asked for, kept; none waited."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


async def test_with_a_durable_sleep_each_retry_is_a_step_of_its_own_and_the_ladder_still_stops() -> None:
    """A runner that sleeps durably gets the provider's retry waits: the call's step ends at each 429, the wait
    is the runner's, the next attempt a step named after the retries made; the ladder counts on across the
    steps, so the call stops after ``max_retries`` retries as it would in one step."""
    busy = Fail(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.25"})
    runner = SleepingRunner()
    retries: list[RunEvent] = []
    with MockLLM([busy, busy, busy, busy, Say("never")]) as server:
        agent = Agent("openai-compatible:mock", base_url=server.base_url, api_key="test-key")
        result = await finish(stream_with_steps(agent, "go", runner, on_event=retries.append))
        assert len(server.requests) == 4  # the first attempt and three retries (the default policy)
    assert result.stop_reason == "error"
    assert runner.ran == ["model:1.1", "model:1.1~1", "model:1.1~2", "model:1.1~3"]
    assert runner.slept == [0.25, 0.25, 0.25]
    assert [(e.attempt, e.delay) for e in retries if isinstance(e, ProviderRetry)] == [(2, 0.25), (3, 0.25), (4, 0.25)]
