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
