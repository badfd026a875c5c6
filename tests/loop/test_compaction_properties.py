"""Compaction over random scripts: whatever the model does (parallel calls, outputs of any size, signed
thinking, unusable answers, several runs on one history), no request passes the window, every request is a
valid conversation, no tool call is ever separated from its result, and the transcript keeps everything."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.providers.wire_rules import assert_request_accepted
from tether import Agent, Limits, tool
from tether.events import Compacted, RunEvent
from tether.loop.context import COMPACTION_REQUEST
from tether.messages import Message, compaction_of, transcript_problems
from tether.providers.base import Request
from tether.providers.scripted import ScriptedCall, ScriptedProvider, Step, empty, reply

WINDOW = 4_000


@tool
def produce(size: int, tag: int) -> str:
    """Produce ``size`` characters (``tag`` makes each call a new one, not a repeat)."""
    return f"{tag}:" + "y" * size


@dataclass(frozen=True)
class Move:
    """One answer of the model: ``calls`` outputs sizes (parallel calls), or text; maybe thinking first."""

    calls: tuple[int, ...] = ()
    thinking: bool = False
    unusable: bool = False


calling = st.builds(
    Move, calls=st.lists(st.integers(10, 2_500), min_size=1, max_size=3).map(tuple), thinking=st.booleans()
)
moves = st.one_of(calling, calling, calling, st.just(Move(unusable=True)))
runs = st.lists(st.lists(moves, min_size=15, max_size=60), min_size=1, max_size=3)


def model_for(script: list[Move], checked: list[Request], issued: list[str]) -> ScriptedProvider:
    remaining = list(script)

    def respond(request: Request) -> Step:
        checked.append(request)
        if request.messages[-1].text == COMPACTION_REQUEST:
            return reply("SUMMARY so far.")
        if not remaining:
            return reply("done")
        move = remaining.pop(0)
        thinking = {"thinking": "let me see", "signature": f"sig{len(remaining)}"} if move.thinking else {}
        if move.unusable:
            return empty()
        scripted = []
        for size in move.calls:
            issued.append(f"call_{len(issued)}")
            scripted.append(ScriptedCall("produce", f'{{"size": {size}, "tag": {len(issued)}}}', issued[-1]))
        return Step(calls=tuple(scripted), **thinking)  # type: ignore[arg-type]

    return ScriptedProvider([respond], repeat_last=True, context_window=WINDOW)


async def play(script_runs: list[list[Move]]) -> tuple[list[Request], list[Message], list[RunEvent], list[str], int]:
    requests: list[Request] = []
    issued: list[str] = []
    history: tuple[Message, ...] = ()
    events: list[RunEvent] = []
    refused = 0
    for script in script_runs:
        model = model_for(script, requests, issued)
        agent = Agent(model, tools=[produce], limits=Limits(max_turns=80, max_tool_calls=500))
        result = await agent.run("work", history=history, on_event=events.append)
        assert result.stop_reason in ("complete", "consecutive_errors", "invalid_response"), result.detail
        history = result.messages
        refused += len(model.refused)
    return requests, list(history), events, issued, refused


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_random_scripts_never_overflow_and_never_orphan_a_call(script_runs: list[list[Move]]) -> None:
    requests, transcript, events, issued, refused = asyncio.run(play(script_runs))

    assert refused == 0
    for request in requests:
        assert transcript_problems(request.messages) == [], request.messages
        assert_request_accepted(request)  # OpenAI Chat, Responses, Anthropic and Gemini would all take it
        assert not any(m.provider_data for m in request.messages if m.role == "user")
    assert transcript_problems(transcript) == []
    calls = [c.id for m in transcript for c in m.tool_calls]
    results = [r.call_id for m in transcript for r in m.tool_results]
    assert sorted(calls) == sorted(results)
    assert calls == issued  # nothing the model did was lost from the transcript
    markers = [m for m in transcript if compaction_of(m)]
    assert len(markers) == len([e for e in events if type(e) is Compacted])
    produced = sum(len(r.content) for m in transcript for r in m.tool_results)
    if produced > 2 * WINDOW * 4:  # twice the window's worth of output went through one history
        assert markers
