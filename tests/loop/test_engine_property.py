"""Property: for any script of model behaviour, any limits and a cancel at any point (or none), a run ends
within its guards, returns a RunResult, emits its events in the documented order and leaves a valid
transcript."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import check_order
from tether import Agent, Done, Limits, tool
from tether.errors import ProviderUnavailable
from tether.events import RunCompleted, RunEvent
from tether.messages import transcript_problems
from tether.providers.scripted import ScriptedProvider, Step, call, cut_off, empty, fail, hang, parallel, reply

CALLS = st.sampled_from(
    [
        call("add", {"a": 1, "b": 2}),
        call("add", '{"a": 1,'),
        call("add", {"a": "x"}),
        call("missing_tool", {}),
        call("explode", {}),
        call("finish", {"answer": "finished"}),
    ]
)
STEPS: st.SearchStrategy[Step] = st.one_of(
    st.builds(reply, st.text(max_size=12), chunk_size=st.sampled_from([None, 1, 3])),
    CALLS,
    st.lists(CALLS, min_size=2, max_size=4).map(lambda calls: parallel(*calls)),
    st.just(empty()),
    CALLS.map(cut_off),
    st.just(fail(ProviderUnavailable("down"), after_text="partial")),
    st.just(hang()),
)
LIMITS = st.builds(
    Limits,
    max_turns=st.integers(1, 5),
    max_tool_calls_per_turn=st.integers(1, 3),
    max_tool_calls=st.integers(1, 8),
    max_consecutive_errors=st.integers(1, 3),
    invalid_response_retries=st.integers(0, 2),
    request_timeout=st.just(0.02),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=st.lists(STEPS, max_size=10),
    limits=LIMITS,
    concurrent=st.booleans(),
    cancel_at=st.none() | st.integers(0, 40),
)
def test_any_script_ends_within_the_guards_with_a_valid_transcript(
    script: list[Step], limits: Limits, concurrent: bool, cancel_at: int | None
) -> None:
    executed: list[str] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        executed.append("add")
        return a + b

    @tool
    def explode() -> str:
        """Fails."""
        executed.append("explode")
        raise RuntimeError("boom")

    @tool
    def finish(answer: str) -> str:
        """Ends the run."""
        executed.append("finish")
        raise Done(answer)

    model = ScriptedProvider(script)
    agent = Agent(model, tools=[add, explode, finish], limits=limits, concurrent_tools=concurrent)

    async def run() -> list[RunEvent]:
        events: list[RunEvent] = []
        async with asyncio.timeout(30):  # a hang fails the example instead of the whole suite
            stream = agent.stream("go")
            async for event in stream:
                if len(events) == cancel_at:
                    stream.cancel()
                events.append(event)
        return events

    events = asyncio.run(run())
    check_order(events)
    last = events[-1]
    assert isinstance(last, RunCompleted)
    result = last.result
    assert transcript_problems(result.messages) == []
    assert result.turns <= limits.max_turns  # type: ignore[operator]
    assert len(executed) <= limits.max_tool_calls  # type: ignore[operator]
    max_calls = limits.max_turns * (limits.invalid_response_retries + 1) + 1  # type: ignore[operator]
    assert len(model.requests) <= max_calls
    assert result.usage.requests == len(model.requests)
    assert result.degraded == (result.stop_reason not in ("complete", "done_tool", "ask_user"))
    assert result.text.strip() or result.stop_reason == "complete", "a degraded run always says something"
    if cancel_at is None:
        assert result.stop_reason != "cancelled"
    if result.stop_reason == "complete":
        assert result.text == result.messages[-1].text
    if result.stop_reason == "done_tool":
        assert result.text == "finished"
