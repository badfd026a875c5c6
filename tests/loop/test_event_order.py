"""The order of a run's events, as ARCHITECTURE.md states it, holds for runs of every kind.

The map's ``event-order`` block is a regular expression over event names; each run below (an answer, tool calls
one by one and together, a corrected answer, a failed call recovered by compaction, a call that fails for good, a
call the provider retried, an answer that thinks first, thinking before a tool call, a step limit and its summary,
a tool that ends the run, a cancel in the middle of a tool, a compaction after the answer, an answer cut at
the output limit and continued, a handoff, an output guardrail's retry, a blocked input, a pause and its
resumption) must match it whole, and
an order the map forbids must not. (``test_failure_events.py`` checks retries over real HTTP against the same
order.)
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from typing_extensions import TypedDict

from tether import Agent, Approve, Compaction, Done, GuardrailResult, Limits, RunEvent, RunResult, tool
from tether.errors import ContextOverflow, RateLimited
from tether.events import ProviderRetry, StreamEnd, StreamStart, TextDelta
from tether.messages import Message
from tether.providers import ScriptedProvider, call, empty, events, fail, parallel, reply
from tether.testing import result_of
from tether.usage import Usage

MAP = Path(__file__).resolve().parents[2] / "ARCHITECTURE.md"


@cache
def order() -> re.Pattern[str]:
    """The map's event order as a pattern over ``"Name,Name,..."``."""
    (block,) = re.findall(r"```event-order\n(.*?)\n```", MAP.read_text(), re.DOTALL)
    expression = re.sub(r"([A-Z][A-Za-z]+)", r"(?:\1,)", block)  # names first: whitespace may separate two
    return re.compile("".join(expression.split()))


def names(events: Sequence[RunEvent]) -> str:
    return "".join(f"{type(event).__name__}," for event in events)


class City(TypedDict):
    name: str


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(concurrent=True)
async def fetch(key: str) -> str:
    """Fetch a value."""
    return key.upper()


@tool
def finish(answer: str) -> str:
    """End the run with an answer."""
    raise Done(answer)


@tool
async def slow(key: str) -> str:
    """A tool that takes its time."""
    await asyncio.sleep(30)
    return key


async def collected(agent: Agent[Any, Any], prompt: str = "go") -> list[RunEvent]:
    return [event async for event in agent.stream(prompt)]


RUNS: dict[str, Callable[[], Agent[Any, Any]]] = {
    "an answer": lambda: Agent(ScriptedProvider([reply("Hi.")])),
    "calls one by one": lambda: Agent(
        ScriptedProvider([parallel(call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4})), reply("3, 7")]),
        tools=[add],
    ),
    "calls together": lambda: Agent(
        ScriptedProvider([parallel(call("fetch", {"key": "a"}), call("fetch", {"key": "b"})), reply("A, B")]),
        tools=[fetch],
    ),
    "a corrected answer": lambda: Agent(ScriptedProvider([empty(), reply("Now an answer.")])),
    "a call that fails for good": lambda: Agent(ScriptedProvider([fail(RateLimited("slow down", status=429))])),
    "a call the provider retried": lambda: Agent(
        ScriptedProvider(
            [
                events(
                    ProviderRetry(2, 0.0, "rate_limited", "slow down", 429),
                    ProviderRetry(3, 0.0, "provider_unavailable", "overloaded", 503),
                    StreamStart(),
                    TextDelta("Hi."),
                    StreamEnd("stop", Usage()),
                )
            ]
        )
    ),
    "a fallback that moves on after its first model's retries": lambda: Agent(
        [
            ScriptedProvider(
                [  # a raw step may end with the error it raises
                    events(
                        ProviderRetry(2, 0.0, "rate_limited", "slow down", 429),
                        RateLimited("slow down", status=429),  # type: ignore[arg-type]
                    )
                ]
            ),
            ScriptedProvider([reply("Hi.")]),
        ]
    ),
    "an answer that thinks first": lambda: Agent(ScriptedProvider([reply("Hi.", thinking="A greeting.")])),
    "a typed output written after thinking": lambda: Agent(
        ScriptedProvider([reply('{"name": "Paris"}', thinking="The capital.", chunk_size=4)]),
        output_type=City,
        output_mode="prompted",
    ),
    "thinking before a tool call": lambda: Agent(
        ScriptedProvider([call("add", {"a": 1, "b": 2}, thinking="Add them."), reply("3", thinking="Done.")]),
        tools=[add],
    ),
    "a step limit and its summary": lambda: Agent(
        ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2 so far.")]), tools=[add], limits=Limits(max_turns=1)
    ),
    "a tool that ends the run": lambda: Agent(ScriptedProvider([call("finish", {"answer": "42"})]), tools=[finish]),
    "a failed call, compacted and made again": lambda: Agent(
        ScriptedProvider(
            [
                reply("First."),
                fail(ContextOverflow("maximum context length is 2000 tokens")),
                reply("A summary of it all."),
                reply("Second."),
            ]
        ),
        compaction=Compaction(context_window=100_000),
    ),
    "an answer cut at the output limit, then continued": lambda: Agent(
        ScriptedProvider([reply("The answer is", finish="length"), reply(" 42.")])
    ),
    "an answer still cut after its continuation": lambda: Agent(
        ScriptedProvider([reply("The answer", finish="length"), reply(" is", finish="length")])
    ),
    "an answer cut, its continuation failing": lambda: Agent(
        ScriptedProvider([reply("The answer", finish="length"), fail(RateLimited("slow down", status=429))])
    ),
    "an agent as a tool": lambda: Agent(
        ScriptedProvider([call("helper", {"input": "2+3?"}), reply("5")]),
        tools=[
            Agent(ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")]), tools=[add]).as_tool(name="helper")
        ],
    ),
    "a handoff to another agent": lambda: Agent(
        ScriptedProvider([call("transfer_to_billing", {})]),
        name="triage",
        handoffs=[Agent(ScriptedProvider([call("add", {"a": 1, "b": 2}), reply("3")]), name="billing", tools=[add])],
    ),
    "an answer an output guardrail sends back": lambda: Agent(
        ScriptedProvider([reply("no"), reply("yes")]),
        output_guardrails=[
            lambda ctx, text: GuardrailResult.passed() if text == "yes" else GuardrailResult.retry("Again.")
        ],
    ),
    "an input an input guardrail blocks": lambda: Agent(
        ScriptedProvider([reply("never")]), input_guardrails=[lambda ctx, prompt: GuardrailResult.block("No.")]
    ),
    "an answer, compacted after it": lambda: Agent(
        ScriptedProvider([reply("the long answer: " + "word " * 1_600), reply("SUMMARY: parts were described.")]),
        compaction=Compaction(context_window=4_000, after_answer="always"),
    ),
}

EARLIER = tuple(
    message
    for n in range(3)
    for message in (Message.user(f"tell me about part {n}"), Message.assistant(f"part {n}: " + "detail " * 280))
)


@pytest.mark.parametrize("kind", RUNS)
async def test_every_kind_of_run_emits_its_events_in_the_order_the_map_states(kind: str) -> None:
    agent = RUNS[kind]()
    if kind == "a failed call, compacted and made again":
        first = await agent.run("one")
        events = [event async for event in agent.stream("two " * 400, history=first.messages)]
    elif kind == "an answer, compacted after it":
        events = [event async for event in agent.stream("and part 3?", history=EARLIER)]
        assert type(events[-2]).__name__ == "Compacted"
    else:
        events = await collected(agent)
    assert order().fullmatch(names(events)), names(events)


async def test_a_run_cancelled_in_the_middle_of_a_tool_answers_its_open_call_before_it_completes() -> None:
    stream = Agent(ScriptedProvider([call("slow", {"key": "k"})]), tools=[slow]).stream("go")
    events: list[RunEvent] = []
    async for event in stream:
        events.append(event)
        if type(event).__name__ == "ToolCallStarted":
            stream.cancel()
    result = result_of(events)
    assert isinstance(result, RunResult)
    assert result.stop_reason == "cancelled"
    assert order().fullmatch(names(events)), names(events)


@tool(approval=True)
def remove(path: str) -> str:
    """Remove a file (each call approved first)."""
    return f"removed {path}"


async def test_a_paused_run_and_its_resumption_emit_their_events_in_the_order_the_map_states() -> None:
    turn = parallel(call("remove", {"path": "a"}, id="r1"), call("add", {"a": 1, "b": 2}, id="r2"))
    paused_events = await collected(Agent(ScriptedProvider([turn]), tools=[remove, add]))
    paused = result_of(paused_events)
    assert paused.stop_reason == "paused"
    assert order().fullmatch(names(paused_events)), names(paused_events)
    assert paused.state is not None
    resumer = Agent(ScriptedProvider([reply("Removed.")]), tools=[remove, add])
    resumed_events = [event async for event in resumer.resume_stream(paused.state, {"r1": Approve()})]
    assert names(resumed_events).startswith("RunStarted,ToolCallStarted,ToolResultReceived,TurnStarted,")
    assert order().fullmatch(names(resumed_events)), names(resumed_events)


@pytest.mark.parametrize(
    "wrong",
    [
        "TurnStarted,RunStarted,RunCompleted,",
        "RunStarted,TurnStarted,ToolCallStarted,ToolResultReceived,TurnCompleted,RunCompleted,",
        "RunStarted,TurnStarted,TextDelta,TurnCompleted,",
        "RunStarted,TurnStarted,TurnCompleted,RunCompleted,ToolResultReceived,",
        "RunStarted,TurnStarted,TurnCompleted,Compacted,Compacted,RunCompleted,",
        "RunStarted,TurnStarted,TurnCompleted,RunCompleted,Compacted,",
        "RunStarted,TurnStarted,TextDelta,ProviderRetry,TurnCompleted,RunCompleted,",
        "RunStarted,TurnStarted,TextDelta,FallbackTaken,TurnCompleted,RunCompleted,",
        "RunStarted,TurnStarted,ThinkingDelta,TurnCompleted,RunCompleted,",
        "RunStarted,TurnStarted,CallFailed,TurnCompleted,RunCompleted,",
        "RunStarted,TurnStarted,TurnCompleted,CallFailed,CallFailed,RunCompleted,",
        "RunStarted,TurnStarted,TurnCompleted,SubAgentEvent,RunCompleted,",
        "RunStarted,TurnStarted,TurnCompleted,ToolCallStarted,ToolResultReceived,SubAgentEvent,RunCompleted,",
        "RunStarted,TurnStarted,HandoffTaken,TurnCompleted,RunCompleted,",
        "RunStarted,TurnStarted,TurnCompleted,ToolCallStarted,HandoffTaken,ToolResultReceived,RunCompleted,",
        "RunStarted,ToolCallStarted,TurnStarted,ToolResultReceived,TurnCompleted,RunCompleted,",
    ],
)
def test_an_order_the_map_forbids_is_refused(wrong: str) -> None:
    assert order().fullmatch(wrong) is None
