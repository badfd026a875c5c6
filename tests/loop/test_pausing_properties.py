"""Property: whatever the interleaving of approvals, rejections, external results, cancellations of a resumed run
and restarts (the state through JSON into a new agent) between pauses, no call is left orphaned (every call of
the final transcript has exactly one result), no run is both paused and going on, and each approved call (and each
ordinary one) runs exactly once, unless a cancellation stopped it first; rejected and external calls never run."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import Agent, Approve, ExternalResult, PausedRun, Reject, RunContext, RunEvent, RunHandle, RunResult, tool
from tether.messages import open_tool_calls, transcript_problems
from tether.paused import Decision
from tether.providers.scripted import ScriptedProvider, Step, call, parallel, reply

Kind = Literal["approval", "external", "plain"]
RAN: Counter[str] = Counter()


@tool(approval=True)
def guarded(ctx: RunContext[None], n: int) -> int:
    """A call that needs approval."""
    assert ctx.tool_call is not None
    RAN[ctx.tool_call.id] += 1
    return n


@tool(external=True)
def outside(n: int) -> int:
    """A call whose result comes from outside."""
    raise AssertionError("never run")


@tool
def plain(ctx: RunContext[None], n: int) -> int:
    """An ordinary call."""
    assert ctx.tool_call is not None
    RAN[ctx.tool_call.id] += 1
    return n


NAMES: dict[Kind, str] = {"approval": "guarded", "external": "outside", "plain": "plain"}
TURNS = st.lists(st.lists(st.sampled_from(["approval", "external", "plain"]), min_size=1, max_size=3), max_size=3)
CHOICES = st.lists(st.tuples(st.booleans(), st.booleans(), st.none() | st.integers(0, 6)), min_size=4, max_size=4)
"""Per resume: accept (approve, or give the result) or reject; a restart through JSON; a cancel at event N."""


def script_of(turns: list[list[Kind]]) -> list[Step]:
    steps: list[Step] = []
    for number, kinds in enumerate(turns):
        calls = [call(NAMES[kind], {"n": place}, id=f"t{number}c{place}") for place, kind in enumerate(kinds)]
        steps.append(calls[0] if len(calls) == 1 else parallel(*calls))
    return [*steps, reply("end")]


def agent(steps: list[Step]) -> Agent[None, str]:
    return Agent(ScriptedProvider(steps), tools=[guarded, outside, plain])


def decided(state: PausedRun, accept: bool) -> dict[str, Decision]:
    decisions: dict[str, Decision] = {}
    for pending in state.pending:
        if not accept:
            decisions[pending.id] = Reject("no")
        elif pending.kind == "approval":
            decisions[pending.id] = Approve(pending.digest)
        else:
            decisions[pending.id] = ExternalResult(str(pending.arguments["n"]))
    return decisions


async def resumed(
    steps: list[Step], state: PausedRun | str, decisions: dict[str, Decision], cancel_at: int | None
) -> RunResult[str]:
    seen = 0
    handle: RunHandle[str] | None = None

    def sink(event: RunEvent) -> None:
        nonlocal seen
        seen += 1
        if cancel_at is not None and seen > cancel_at and handle is not None:
            handle.cancel()

    handle = RunHandle(agent(steps).resume_stream(state, decisions, on_event=sink))
    return await handle


async def play(
    turns: list[list[Kind]], choices: list[tuple[bool, bool, int | None]]
) -> tuple[RunResult[str], dict[str, Decision], bool]:
    steps = script_of(turns)
    result = await agent(steps).run("go")
    given: dict[str, Decision] = {}
    cancelled = False
    for accept, restart, cancel_at in choices:
        if result.state is None:
            break
        assert result.stop_reason == "paused"
        decisions = decided(result.state, accept)
        given.update(decisions)
        remaining = steps[result.state.turns :]
        state: PausedRun | str = result.state.to_json() if restart else result.state
        result = await resumed(remaining, state, decisions, cancel_at)
        if result.stop_reason == "cancelled":
            cancelled = True
            break
    return result, given, cancelled


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(turns=TURNS, choices=CHOICES)
def test_no_interleaving_orphans_a_call_or_runs_an_approved_one_twice(
    turns: list[list[Kind]], choices: list[tuple[bool, bool, int | None]]
) -> None:
    RAN.clear()
    result, given, cancelled = asyncio.run(play(turns, choices))
    paused = result.stop_reason == "paused"
    assert paused == (result.state is not None) == bool(result.pending)  # paused, or going on: never both
    messages = list(result.messages)
    if paused:
        assert result.state is not None
        open_ids = [c.id for c in open_tool_calls(messages)]
        assert sorted(open_ids) == sorted([p.id for p in result.pending] + [r.call_id for r in result.state.results])
        assert transcript_problems(messages[:-1]) == []
    else:
        assert transcript_problems(messages) == []  # every call has exactly one result
    results = {r.call_id: r for m in messages for r in m.tool_results}
    assert all(count == 1 for count in RAN.values()), RAN  # nothing ever runs twice
    for call_id, decision in given.items():
        if not isinstance(decision, Approve):
            assert RAN[call_id] == 0  # rejected and external calls never run here
        elif not cancelled and call_id in results:
            assert RAN[call_id] == 1, call_id
        if call_id in results and results[call_id].code == "cancelled":
            continue
        if isinstance(decision, Approve) and call_id in results:
            assert RAN[call_id] == 1, call_id
