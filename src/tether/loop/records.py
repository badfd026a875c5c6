"""The records of a run's provider calls as they happen: what ``RunResult.turn_records`` holds.

A :class:`CallRecorder` keeps the clock and the counts of the provider call under way (when it started, when
its first event came, when it ended, its usage, the retries the provider made) and, when the call's
``TurnCompleted`` is emitted, turns them into a :class:`~tether.events.TurnRecord`. The tool calls an answer
asked for are put on its record once their results are in. It costs a few clock readings per call, so it is
always on: the records need no telemetry.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace

from tether.errors import TetherError
from tether.events import LlmEvent, ToolCallRecord, TurnRecord
from tether.loop.accumulator import AccumulatedTurn
from tether.loop.interrupts import Interrupted
from tether.usage import Usage


class CallRecorder:
    """The records of one run (see the module docstring)."""

    __slots__ = ("call_ended", "call_started", "first_event", "records", "retries", "run_started", "usage")

    def __init__(self) -> None:
        self.records: list[TurnRecord] = []
        self.run_started = time.perf_counter()
        self.call_started = self.call_ended = self.first_event = 0.0
        self.usage = Usage()
        self.retries = 0

    def begin_call(self) -> None:
        """A provider call is about to be made: its clock starts, its counts are zero."""
        self.call_started = self.call_ended = time.perf_counter()
        self.first_event = 0.0
        self.usage = Usage()
        self.retries = 0

    def end_call(self, first_event: float, usage: Usage) -> None:
        """The call's stream is over: ``first_event`` is when its first event after ``StreamStart`` came
        (0 if none did), ``usage`` what it used."""
        self.first_event, self.call_ended, self.usage = first_event, time.perf_counter(), usage

    def record(
        self,
        turn_no: int,
        attempt: int,
        final: bool,
        turn: AccumulatedTurn,
        rejected: str | None,
        failure: BaseException | None,
    ) -> TurnRecord:
        """The record of the call that just ended, kept."""
        started, first = self.call_started, self.first_event
        record = TurnRecord(
            turn=turn_no,
            attempt=attempt,
            final=final,
            duration_ms=(self.call_ended - started) * 1000.0,
            ttft_ms=(first - started) * 1000.0 if first else None,
            usage=self.usage,
            finish_reason=turn.finish_reason,
            model=turn.model,
            response_id=turn.response_id,
            retries=self.retries,
            rejected=rejected,
            error=error_code(failure) if failure is not None else None,
        )
        self.records.append(record)
        return record

    def attach_calls(self, calls: Sequence[ToolCallRecord]) -> None:
        """Put the records of the tool calls the last answer asked for on its record."""
        if self.records:
            self.records[-1] = replace(self.records[-1], tool_calls=tuple(calls))

    def run_ms(self) -> float:
        """Milliseconds since the run started."""
        return (time.perf_counter() - self.run_started) * 1000.0


def error_code(failure: BaseException) -> str:
    """The stable code of what ended a provider call: a tether error's code, an interrupt's reason."""
    if isinstance(failure, Interrupted):
        error = failure.interrupt.error
        return error.code if isinstance(error, TetherError) else str(failure.interrupt.reason)
    if isinstance(failure, TetherError):
        return failure.code
    return type(failure).__name__


async def within(stream: AsyncIterator[LlmEvent], context: AbstractContextManager[object]) -> AsyncIterator[LlmEvent]:
    """``stream`` with ``context`` entered around each step of it, and never across a ``yield``: the provider's
    work (its HTTP request, its retries) happens inside the call's context, the host's code outside it."""
    try:
        while True:
            with context:
                try:
                    event = await stream.__anext__()
                except StopAsyncIteration:
                    return
            yield event
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
