"""Compact, comparable forms of a provider's events and of a run, for replay tests of any provider.

:func:`streamed` folds a provider's ``LlmEvent``s by hand (not with the loop's accumulator, which is under
test too) and checks the provider contract on the way; :func:`compact` is ``describe()`` of a run's events
with consecutive deltas joined, short enough to write down as a snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.helpers import assert_valid, check_order, describe
from tether import Agent
from tether.events import (
    LlmEvent,
    RunCompleted,
    RunEvent,
    RunResult,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.messages import Message, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import Provider, Request
from tether.usage import Usage


async def collect(provider: Provider, request: Request) -> list[LlmEvent]:
    """Every event of one provider call."""
    return [event async for event in provider.stream(request)]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call as a stream delivered it: its arguments are the pieces joined, not parsed."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Streamed:
    """A provider's events folded by hand (not by the loop's accumulator), for comparisons."""

    model: str | None
    text: str
    thinking: str
    calls: tuple[Call, ...]
    finish: str
    usage: Usage
    shape: str = field(compare=False)
    """The event kinds, runs counted: ``start thinking*3 text*2 end``."""


def streamed(events: list[LlmEvent]) -> Streamed:
    """Fold the events, checking the provider contract: StreamStart first, one StreamEnd last, every call
    started before its deltas and ended before the stream ends."""
    assert isinstance(events[0], StreamStart), events[0]
    assert isinstance(events[-1], StreamEnd), events[-1]
    assert sum(isinstance(event, StreamStart | StreamEnd) for event in events) == 2
    start, end = events[0], events[-1]
    text, thinking = [], []
    calls: dict[str, tuple[str, list[str]]] = {}
    ended: list[str] = []
    for event in events[1:-1]:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ThinkingDelta):
            thinking.append(event.text)
        elif isinstance(event, ToolCallStart):
            assert event.id not in calls, f"call {event.id} started twice"
            calls[event.id] = (event.name, [])
        elif isinstance(event, ToolCallDelta):
            assert event.id in calls, f"a delta for call {event.id} before its start"
            assert event.id not in ended, f"a delta for call {event.id} after its end"
            calls[event.id][1].append(event.arguments_delta)
        else:
            assert isinstance(event, ToolCallEnd), event
            ended.append(event.id)
    assert sorted(ended) == sorted(calls), "every call is ended once"
    return Streamed(
        start.model,
        "".join(text),
        "".join(thinking),
        tuple(Call(call_id, name, "".join(parts)) for call_id, (name, parts) in calls.items()),
        end.finish_reason,
        end.usage,
        shape(events),
    )


SHAPE_NAMES = {
    "stream_start": "start",
    "thinking_delta": "thinking",
    "text_delta": "text",
    "tool_call_start": "call-start",
    "tool_call_delta": "call-delta",
    "tool_call_end": "call-end",
    "stream_end": "end",
    "provider_retry": "retry",
}


def shape(events: list[LlmEvent]) -> str:
    """The kinds of the events in order, a run of one kind counted: ``start thinking*3 text*2 end``."""
    runs: list[list[Any]] = []
    for event in events:
        name = SHAPE_NAMES[event.kind]
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return " ".join(name if count == 1 else f"{name}*{count}" for name, count in runs)


def compact(events: list[RunEvent]) -> list[str]:
    """``describe()`` of a run's events, with consecutive text or thinking deltas joined into one line."""
    lines: list[str] = []
    joined: list[Any] = []  # [kind, count, text]
    for event in events:
        if isinstance(event, TextDelta | ThinkingDelta):
            kind = "Text" if isinstance(event, TextDelta) else "Thinking"
            if joined and joined[0] == kind:
                joined[1] += 1
                joined[2] += event.text
                continue
            _flush(joined, lines)
            joined[:] = [kind, 1, event.text]
            continue
        _flush(joined, lines)
        lines.append(describe(event))
    _flush(joined, lines)
    return lines


def _flush(joined: list[Any], lines: list[str]) -> None:
    if joined:
        kind, count, text = joined
        lines.append(f"{kind}*{count}({text!r})" if count > 1 else f"{kind}({text!r})")
        joined.clear()


async def run_agent(agent: Agent, prompt: str, history: tuple[Message, ...] = ()) -> tuple[list[RunEvent], RunResult]:
    """A run's events and result; the events come in the documented order and the transcript is valid."""
    events = [event async for event in agent.stream(prompt, history=history)]
    check_order(events)
    last = events[-1]
    assert isinstance(last, RunCompleted)
    assert_valid(last.result)
    return events, last.result


def parts_of(message: Message) -> list[str]:
    """A message's parts, one short line each (long text cut to its first 40 characters)."""
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, Text):
            lines.append(f"Text({part.text[:40]!r})")
        elif isinstance(part, Thinking):
            lines.append(f"Thinking({part.text[:40]!r})")
        elif isinstance(part, ToolCall):
            lines.append(f"ToolCall({part.id}, {part.name}, {part.arguments})")
        elif isinstance(part, ToolResult):
            lines.append(f"ToolResult({part.call_id}, {part.content!r}{', error' if part.is_error else ''})")
        else:
            lines.append(f"Attachment({part.media_type}, {part.size} bytes)")
    return lines
