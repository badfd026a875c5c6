"""Shared helpers for the loop's tests: run an agent and describe its events compactly."""

from __future__ import annotations

from tether import Agent
from tether.events import (
    RunCompleted,
    RunEvent,
    RunResult,
    RunStarted,
    TextDelta,
    ThinkingDelta,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
    TurnStarted,
)
from tether.messages import Message, transcript_problems


def describe(event: RunEvent) -> str:
    """One short line per event, for comparing whole event sequences (snapshots) in tests."""
    if isinstance(event, RunStarted):
        return "RunStarted"
    if isinstance(event, TurnStarted):
        suffix = f" attempt={event.attempt}" if event.attempt > 1 else ""
        return f"TurnStarted({event.turn}{suffix}{' final' if event.final else ''})"
    if isinstance(event, TextDelta):
        return f"Text({event.text!r})"
    if isinstance(event, ThinkingDelta):
        return f"Thinking({event.text!r})"
    if isinstance(event, ToolCallStarted):
        return f"ToolCall({event.call.name})"
    if isinstance(event, ToolResultReceived):
        flag = f"error:{event.result.code}" if event.result.is_error else event.result.content
        return f"ToolResult({event.result.name} -> {flag})"
    if isinstance(event, TurnCompleted):
        return f"TurnCompleted({event.turn}{' rejected' if event.rejected else ''})"
    assert isinstance(event, RunCompleted)
    return f"RunCompleted({event.result.stop_reason})"


async def run_events(agent: Agent, prompt: str, history: tuple[Message, ...] = ()) -> list[RunEvent]:
    return [event async for event in agent.stream(prompt, history=history)]


def result_of(events: list[RunEvent]) -> RunResult:
    last = events[-1]
    assert isinstance(last, RunCompleted), f"the last event is {last!r}, not RunCompleted"
    return last.result


def assert_valid(result: RunResult) -> None:
    """The run's transcript is valid: every tool call has exactly one result."""
    assert transcript_problems(result.messages) == []


def check_order(events: list[RunEvent]) -> None:
    """The order of DESIGN.md §4: RunStarted; per turn TurnStarted, deltas, TurnCompleted, then per call
    ToolCallStarted and its ToolResultReceived; RunCompleted once, last. Every started turn and call ends."""
    assert isinstance(events[0], RunStarted)
    assert isinstance(events[-1], RunCompleted)
    in_turn = False
    open_calls: list[str] = []
    for event in events[1:-1]:
        name = describe(event)
        if isinstance(event, TurnStarted):
            assert not in_turn, name
            assert not open_calls, name
            in_turn = True
        elif isinstance(event, TextDelta | ThinkingDelta):
            assert in_turn, name
        elif isinstance(event, TurnCompleted):
            assert in_turn, name
            in_turn = False
        elif isinstance(event, ToolCallStarted):
            assert not in_turn, name
            open_calls.append(event.call.id)
        else:
            assert isinstance(event, ToolResultReceived), name
            assert event.result.call_id in open_calls, name
            open_calls.remove(event.result.call_id)
    assert not in_turn, "a turn started and never completed"
    assert not open_calls, f"calls started and never answered: {open_calls}"
