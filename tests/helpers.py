"""Shared helpers for the loop's tests: the event-order check, and the helpers users get from ``tether.testing``."""

from __future__ import annotations

from tether.events import (
    CallFailed,
    HandoffTaken,
    PartialOutput,
    ProviderRetry,
    RunCompleted,
    RunEvent,
    RunStarted,
    TextDelta,
    ThinkingDelta,
    ThinkingEnded,
    ThinkingStarted,
    ToolCallStarted,
    ToolResultReceived,
    TurnCompleted,
    TurnStarted,
)
from tether.testing.runs import assert_valid_transcript as assert_valid
from tether.testing.runs import describe, result_of, run_events

__all__ = ["assert_valid", "check_order", "describe", "result_of", "run_events"]


def check_order(events: list[RunEvent]) -> None:
    """The order of ARCHITECTURE.md §4: RunStarted; per turn TurnStarted, retries and deltas (thinking marks and
    partial outputs among them), TurnCompleted, a CallFailed right after a TurnCompleted that did not complete,
    then per call ToolCallStarted and its ToolResultReceived; RunCompleted once, last. Every started turn and call
    ends."""
    assert isinstance(events[0], RunStarted)
    assert isinstance(events[-1], RunCompleted)
    in_turn = False
    open_calls: list[str] = []
    previous: RunEvent = events[0]
    for event in events[1:-1]:
        name = describe(event)
        if isinstance(event, TurnStarted):
            assert not in_turn, name
            assert not open_calls, name
            in_turn = True
        elif isinstance(
            event, TextDelta | ThinkingDelta | PartialOutput | ProviderRetry | ThinkingStarted | ThinkingEnded
        ):
            assert in_turn, name
        elif isinstance(event, CallFailed):
            assert isinstance(previous, TurnCompleted), name
            assert previous.status != "completed", name
        elif isinstance(event, TurnCompleted):
            assert in_turn, name
            in_turn = False
        elif isinstance(event, HandoffTaken):
            assert not in_turn, name
            assert not open_calls, name
        elif isinstance(event, ToolCallStarted):
            assert not in_turn, name
            open_calls.append(event.call.id)
        else:
            assert isinstance(event, ToolResultReceived), name
            assert event.result.call_id in open_calls, name
            open_calls.remove(event.result.call_id)
        previous = event
    assert not in_turn, "a turn started and never completed"
    assert not open_calls, f"calls started and never answered: {open_calls}"
