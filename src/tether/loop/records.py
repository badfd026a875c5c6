"""The records of a run's provider calls as they happen: what ``RunResult.turn_records`` holds.

A :class:`CallRecorder` keeps the clock and the counts of the provider call under way (when it started, when
its first event came, when it ended, its usage, the retries the provider made) and, when the call's
``TurnCompleted`` is emitted, turns them into a :class:`~tether.events.TurnRecord`. The tool calls an answer
asked for are put on its record once their results are in. It costs a few clock readings per call, so it is
always on: the records need no telemetry.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from msgspec.structs import replace

from tether.errors import TetherError
from tether.events import FinishReason, LlmEvent, ToolCallRecord, TurnRecord
from tether.loop.accumulator import AccumulatedTurn
from tether.loop.interrupts import Interrupted
from tether.messages import Message, Text, ToolResult
from tether.usage import NO_USAGE, Price, Usage, cost_of

INTERRUPTED_CALL = "the process running the run stopped during this call (or just before it), which was made again: "
INTERRUPTED_CALL += "what it used, if it was made, is not known and not counted"
"""The ``rejected`` of a durable run's call that was interrupted and made again (:meth:`CallRecorder.interrupted`)."""
_NO_ANSWER = Message("assistant", ())


class CallRecorder:
    """The records of one run (see the module docstring).

    A call's figures are kept as the plain arguments of its :class:`TurnRecord`, and the records are made once,
    when the run's result is: a step pays for a few assignments, not for building and rebuilding records.
    """

    __slots__ = (
        "_calls",
        "_compactions",
        "call_ended",
        "call_started",
        "first_event",
        "nested",
        "retries",
        "run_started",
        "usage",
        "waited",
    )

    def __init__(self) -> None:
        self._calls: list[list[Any]] = []
        """Per call, the arguments of its ``TurnRecord`` up to its error, then its message (its text is read when
        the record is made, not per call: a used answer is the transcript's own message, so keeping it costs a
        reference), its tool calls' results and durations, its retries' wait and, last, whether it was a response
        cache's replay."""
        self._compactions: tuple[int, ...] = ()
        """Positions in ``_calls`` of the calls that asked for a compaction's summary (rare: a tuple, empty and
        shared until one does, where an empty set would be 216 bytes per run)."""
        self.run_started = time.perf_counter()
        self.call_started = self.call_ended = self.first_event = 0.0
        self.usage = NO_USAGE
        self.retries = 0
        self.waited = 0.0
        """Seconds the provider's retries of the call under way waited (``TurnRecord.retry_wait_ms``)."""
        self.nested: dict[str, tuple[TurnRecord, ...]] | None = None
        """The records of the agents tool calls ran, by call id (``nesting.py``); ``None`` until one did."""

    def begin_call(self) -> None:
        """A provider call is about to be made: its clock starts, its counts are zero."""
        self.call_started = self.call_ended = time.perf_counter()
        self.first_event = 0.0
        self.usage = NO_USAGE
        self.retries = 0
        self.waited = 0.0

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
        *,
        compaction: bool = False,
    ) -> None:
        """Keep the figures of the call that just ended."""
        if compaction:
            self._compactions += (len(self._calls),)
        started, first = self.call_started, self.first_event
        ttft = (first - started) * 1000.0 if first else None
        self._calls.append([
            turn_no, attempt, final, (self.call_ended - started) * 1000.0, ttft, self.usage, turn.finish_reason,
            turn.model, turn.response_id, self.retries, rejected, error_code(failure) if failure is not None else None,
            turn.message, None, self.waited * 1000.0, turn.cached,
        ])  # fmt: skip

    def last(self) -> TurnRecord:
        """The record of the call kept last, without its tool calls (for an observer)."""
        position = len(self._calls) - 1
        *fields, message, _, waited, cached = self._calls[-1]
        return TurnRecord(*[*fields, (), position in self._compactions, answer_text(message), waited, cached])

    def answer_finish(self) -> FinishReason | None:
        """How the answer the run stopped with ended (``length``: at the output limit): the finish of its last
        call whose answer was used (neither a compaction's, nor rejected, nor failed), else of its last call that
        was not a compaction's; ``None`` when no call was made."""
        calls = [row for position, row in enumerate(self._calls) if position not in self._compactions]
        used = [row for row in calls if row[10] is None and row[11] is None]
        finish: FinishReason | None = (used or calls or [[None] * 7])[-1][6]
        return finish

    def interrupted(self, turn_no: int, attempt: int, final: bool) -> None:
        """A durable run's call that an earlier execution of the run was making (or about to make) when its process
        stopped, made again by this one: a record of its own, before the one made again, with no usage (the
        provider never said what it used) and ``error`` ``"interrupted"``."""
        row = [turn_no, attempt, final, 0.0, None, NO_USAGE, "error", None, None, 0, INTERRUPTED_CALL, "interrupted"]
        self._calls.append([*row, _NO_ANSWER, None, 0.0, False])

    def attach_calls(self, results: Sequence[ToolResult], durations: Mapping[str, float]) -> None:
        """The results of the tool calls the last answer asked for, in the model's order, and how long those
        that ran took (milliseconds, by call id)."""
        if self._calls:
            self._calls[-1][-3] = (results, durations)

    def records(self, price: Price | None = None) -> tuple[TurnRecord, ...]:
        """Every call's record, with its tool calls', and its cost at ``price`` (priced here, once, at the end)."""
        made = []
        for position, arguments in enumerate(self._calls):
            *fields, message, calls, waited, cached = arguments
            fields += [
                () if calls is None else tool_records(calls[0], calls[1], self.nested),
                position in self._compactions,
                answer_text(message),
                waited,
                cached,
                None if price is None else cost_of(fields[5], price),
            ]
            made.append(TurnRecord(*fields))
        return tuple(made)

    def run_ms(self) -> float:
        """Milliseconds since the run started."""
        return (time.perf_counter() - self.run_started) * 1000.0


def answer_text(message: Message) -> str:
    """``message.text``, without its generator for the commonest answers: one text, or one call and no text."""
    parts = message.parts
    if len(parts) == 1:
        part = parts[0]
        return part.text if type(part) is Text else ""
    return message.text


def tool_records(
    results: Sequence[ToolResult],
    durations: Mapping[str, float],
    nested: Mapping[str, tuple[TurnRecord, ...]] | None = None,
) -> tuple[ToolCallRecord, ...]:
    """A record per tool call, in order: its result's outcome and, if it ran, its duration (and the records of
    the agent it ran, in ``nested``)."""
    records = tuple(tool_record(result, durations.get(result.call_id)) for result in results)
    if not nested:
        return records
    return tuple(
        replace(record, turn_records=nested[record.call_id]) if record.call_id in nested else record
        for record in records
    )


def tool_record(result: ToolResult, duration_ms: float | None) -> ToolCallRecord:
    return ToolCallRecord(result.call_id, result.name, result.is_error, result.code, duration_ms)


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
        await close_stream(stream)


async def close_stream(stream: AsyncIterator[object]) -> None:
    """Close a provider's stream (an async generator) so that it releases its connection."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
