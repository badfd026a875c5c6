"""Helpers for testing agents: run one and keep its events, say each event in a line, check the transcript.

They are plain functions (no pytest needed); the pytest plugin (:mod:`tether.testing.plugin`) adds fixtures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from tether.events import (
    CallFailed,
    Compacted,
    FallbackTaken,
    HandoffTaken,
    PartialOutput,
    ProviderRetry,
    RunCompleted,
    RunEvent,
    RunResult,
    RunStarted,
    SubAgentEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingEnded,
    ThinkingStarted,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
    TurnStarted,
)
from tether.messages import Message, ToolResult, open_tool_calls, transcript_problems

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.providers.scripted import Responder, ScriptedProvider, Step

__all__ = ["ScriptFactory", "assert_valid_transcript", "describe", "result_of", "run_events"]


class ScriptFactory(Protocol):
    """The ``tether_scripted`` fixture: a :class:`ScriptedProvider` from steps (options as its constructor's)."""

    def __call__(self, *steps: Step | Responder, **options: Any) -> ScriptedProvider: ...


def describe(event: RunEvent) -> str:
    """One short line per event, to compare whole event sequences: ``["RunStarted", "TurnStarted(1)", ...]``."""
    if isinstance(event, RunStarted):
        return "RunStarted"
    if isinstance(event, TurnStarted):
        suffix = f" attempt={event.attempt}" if event.attempt > 1 else ""
        return f"TurnStarted({event.turn}{suffix}{' final' if event.final else ''})"
    if isinstance(event, TextDelta):
        return f"Text({event.text!r})"
    if isinstance(event, ThinkingDelta):
        return f"Thinking({event.text!r})"
    if isinstance(event, PartialOutput):
        return f"PartialOutput({event.data!r})"
    if isinstance(event, Compacted):
        return f"Compacted({event.turn} {event.reason})"
    if isinstance(event, ToolCallStarted):
        return f"ToolCall({event.call.name})"
    if isinstance(event, ToolResultReceived):
        flag = f"error:{event.result.code}" if event.result.is_error else event.result.content
        return f"ToolResult({event.result.name} -> {flag})"
    if isinstance(event, TurnCompleted):
        return f"TurnCompleted({event.turn}{' rejected' if event.rejected else ''})"
    if isinstance(event, CallFailed):
        return f"CallFailed({event.turn} {event.code} -> {event.then})"
    if isinstance(event, ProviderRetry):
        return f"ProviderRetry({event.attempt} {event.code})"
    if isinstance(event, FallbackTaken):
        return f"FallbackTaken({event.attempt} {event.code})"
    if isinstance(event, ThinkingStarted | ThinkingEnded):
        return type(event).__name__
    if isinstance(event, SubAgentEvent):
        return f"SubAgent({'/'.join(event.path)}: {describe(event.event)})"
    if isinstance(event, HandoffTaken):
        return f"HandoffTaken({event.from_agent} -> {event.to_agent})"
    assert isinstance(event, RunCompleted)
    return f"RunCompleted({event.result.stop_reason})"


async def run_events(agent: Agent[Any, Any], prompt: str, history: Sequence[Message] = ()) -> list[RunEvent]:
    """Every event of one run of ``agent``, ``RunCompleted`` last; :func:`result_of` gives its result."""
    return [event async for event in agent.stream(prompt, history=history)]


def result_of(events: Sequence[RunEvent]) -> RunResult[Any]:
    """The result the run's last event (its ``RunCompleted``) carries."""
    last = events[-1]
    assert isinstance(last, RunCompleted), f"the last event is {last!r}, not RunCompleted"
    return last.result


def assert_valid_transcript(result: RunResult[Any]) -> None:
    """The run's transcript is valid: every tool call has exactly one result, and each result its call. A paused
    run's last calls are open exactly when they are its pending calls (``result.pending``), the others answered
    by the results its state keeps."""
    messages = result.messages
    if result.state is not None:
        pending = [call.id for call in result.pending]
        assert [call.id for call in open_tool_calls(messages)] == [call.id for call in messages[-1].tool_calls], (
            "a paused run's turn is left open whole, its results kept in its state"
        )
        kept = {r.call_id for r in result.state.results}
        assert sorted(pending + sorted(kept)) == sorted(c.id for c in messages[-1].tool_calls), (
            "each call of a paused turn is pending or has its result in the state"
        )
        messages = (*messages, Message("tool", tuple(ToolResult(c.id, c.name, "") for c in messages[-1].tool_calls)))
    problems = transcript_problems(messages)
    assert problems == [], f"the transcript is not valid: {problems}"
