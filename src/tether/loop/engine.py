"""The turn loop: start, build, infer, accumulate, act, check, finish (DESIGN.md §4).

A :class:`Run` is one execution of an agent. :meth:`Run.events` is an async generator of ``RunEvent``s and
the only driver of the loop: ``Agent.run()`` consumes it to its ``RunCompleted``. Each step is one method:

* start (``events``): arm the run deadline, emit ``RunStarted``;
* build (``_build``): system prompt once, the shaped history, the tool definitions -> ``Request``;
* infer and accumulate (``_infer``): stream the provider's events under the step deadline (the provider
  keeps ``request_timeout`` itself, between its retries),
  passing text and thinking deltas straight through, folding everything into an ``AccumulatedTurn``;
* act (``_turns``): reject an unusable answer and retry it with a correction, or store the answer and run
  its tool calls; after a turn that asked again for calls whose results the model already had
  (``repeats.py``), the next request allows only an answer (tools off; in JSON action mode, the final action);
* check (``_turns``, via ``LoopGuard.after_turn``): turn, tool-call, error and budget limits;
* finish (``_summarize``, ``_finish``): on a step limit, one tools-off call for a final answer; then the
  ``RunResult``.

Who stops the run is in the signatures: ``_turns`` and ``_summarize`` each fill the :class:`Decision` they are
handed (the stop and the answer it comes with), and ``events`` reads it once their events are over; an
exception out of a step (an interrupt, a provider's error) is the only other way a run stops.

Whatever happens, the run ends with ``RunCompleted`` and a valid transcript; see ``interrupts.py`` for the
cancellation contract and ``guard.py`` for the limits'.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING

from tether.errors import ContextOverflow, TetherError
from tether.events import (
    RunCompleted,
    RunEvent,
    RunResult,
    RunStarted,
    TextDelta,
    ToolResultReceived,
    TurnStarted,
)
from tether.limits import StopReason
from tether.loop.actions import ActionProtocol
from tether.loop.choice import choice_for_turn
from tether.loop.compaction import Compacting, still_too_long
from tether.loop.context import (
    correction,
    fallback_text,
    prepare_history,
    shape_history,
    summary_request,
)
from tether.loop.context.tokens import fixed_chars
from tether.loop.executor import ToolBatch, ToolExecutor, cancelled_result
from tether.loop.guard import LoopGuard, Stop
from tether.loop.interrupts import Interrupt, Interrupted, Interrupter, deadline_passed
from tether.loop.records import CallRecorder
from tether.loop.repeats import answer_from_results
from tether.loop.spec import RunSpec
from tether.messages import Message, ToolResult, open_tool_calls
from tether.providers.base import Request, ToolChoice, ToolDefinition
from tether.secrets import mask_exception_in_place
from tether.telemetry.observer import RunInfo
from tether.tools.output_cache import OutputCache
from tether.tools.registry import ToolRegistry
from tether.usage import Usage

if TYPE_CHECKING:
    from tether.errors import ProviderError
    from tether.loop.steps import StepRunner
    from tether.sessions.base import OutputStore
    from tether.telemetry.observer import RunObserver

EventSink = Callable[[RunEvent], None]
Checkpoint = Callable[[Sequence[Message], Usage], Awaitable[None]]
"""Saves a run's state (its transcript so far and its usage) after every turn and at its end."""

SUMMARIZED_STOPS = frozenset({StopReason.MAX_TURNS, StopReason.MAX_TOOL_CALLS, StopReason.CONSECUTIVE_ERRORS})
"""Step limits: the model has not answered yet, so the loop asks it once more, without tools."""
ANSWERED_STOPS = frozenset({StopReason.COMPLETE, StopReason.DONE_TOOL, StopReason.ASK_USER})


class Decision:
    """What a turn (or the summary call) decided, set by that step alone; ``stop`` ``None``: the run goes on.
    The caller makes it, hands it to the step and reads it once the step's events are over."""

    __slots__ = ("answer", "asked", "stop")

    def __init__(self) -> None:
        self.stop: Stop | None = None
        self.answer: str | None = None
        """The run's answer, when the step that stopped it has one."""
        self.asked = False
        """The model was already asked, tools off, for an answer it could not give: no summary call after."""

    def stop_with(self, stop: Stop | None, answer: str | None = None, *, asked: bool = False) -> None:
        self.stop, self.answer, self.asked = stop, answer, asked


class Run(Compacting):
    """One run of an agent; iterate :meth:`events` once."""

    __slots__ = (
        "__weakref__", "_action_calls", "_batch", "_on_retry", "_turn_no", "actions",
        "body_start", "checkpoint", "deadline", "definitions", "executor", "guard",
        "interrupter", "observer", "outputs", "prompt", "recorder", "result", "run_id", "session_id", "sink_error",
        "sinks", "spec", "steps", "system_text", "transcript", "turn_usage", "window",
    )  # fmt: skip
    """Slots, not a dict: a run in flight is a few hundred bytes smaller and its attributes quicker to read."""

    def __init__(
        self,
        spec: RunSpec,
        prompt: str,
        history: Sequence[Message],
        interrupter: Interrupter,
        sinks: Sequence[EventSink] = (),
        checkpoint: Checkpoint | None = None,
        session_id: str | None = None,
        output_store: OutputStore | None = None,
        steps: StepRunner | None = None,
    ) -> None:
        self.spec = spec
        self.steps = steps
        """Runs each provider call and tool call as a durable step (``loop/steps.py``); ``None``: directly."""
        self.session_id = session_id
        self.prompt = prompt
        self.checkpoint = checkpoint
        self.interrupter = interrupter
        self.run_id = steps.run_id if steps is not None else new_run_id()
        self.transcript = prepare_history(spec.system, history)
        self.body_start = 1 if self.transcript and self.transcript[0].role == "system" else 0
        self.system_text = self.transcript[0].text if self.body_start else None
        self.first_new = len(self.transcript)
        self.transcript.append(Message.user(prompt))
        self.guard = LoopGuard(spec.limits, spec.price, repeatable=spec.is_repeatable)
        self.observer: RunObserver | None = spec.observe() if spec.observe is not None else None
        self.outputs = (
            OutputCache(spec.cache_tool_outputs, cap=spec.max_tool_output, store=output_store, session_id=session_id)
            if spec.cache_tool_outputs is not None
            else None
        )
        """Long tool outputs kept whole (in ``output_store`` too, when the run is in a session)."""
        self.executor = ToolExecutor(
            spec.tools,
            interrupter,
            timeout=spec.limits.tool_timeout,
            concurrent_tools=spec.concurrent_tools,
            max_concurrency=spec.max_concurrency,
            permissions=spec.permissions,
            max_output=spec.max_tool_output,
            masker=spec.masker,
            observer=self.observer,
            redaction=spec.redaction,
            outputs=self.outputs,
            steps=steps,
        )
        self._action_calls = 0
        self._offer(spec.offered)
        self.window = self._context_window()
        self._sent_view: tuple[Message, ...] | None = None
        if history and self.outputs is not None and self.outputs.notice(self.transcript):  # only a history has results
            self._offer_reader()
        self.sinks: Sequence[EventSink] = tuple(sinks)
        """A tuple, the shared empty one without sinks: a run waiting on its provider holds one object fewer."""
        self.sink_error: Exception | None = None
        self.turn_usage: list[Usage] = []
        self.deadline: float | None = None
        self.result: RunResult | None = None
        self._best_effort = ""
        self._accumulated = None
        self._stream_problem = None
        self._stream_error = None
        self._batch: ToolBatch | None = None
        self._turn_no = 0
        self.recorder = CallRecorder()
        self._on_retry = self._retried  # one bound method per run, not one per request

    # --- start ------------------------------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[RunEvent, None]:
        """Run the loop, yielding its events; ends with ``RunCompleted`` (unless the consumer leaves early)."""
        interrupter = self.interrupter
        interrupter.attach()
        limits = self.spec.limits
        alarm = None
        answer: str | None = None
        if limits.run_timeout is not None:  # on the loop's one alarm, under the run's own key (the run)
            alarm = interrupter.alarm
            self.deadline = alarm.time() + limits.run_timeout
            alarm.set(self, self.deadline, self._run_timed_out)
        try:
            self.recorder.run_started = time.perf_counter()
            if self.observer is not None:
                self.observer.run_started(RunInfo.of(self))
            yield self._emit(RunStarted(self.run_id, self.spec.provider.info.model_string, self.prompt))
            stop = None
            decided = Decision()
            try:
                turns = self._turns(decided)
                try:
                    async for event in turns:
                        yield event
                finally:
                    await turns.aclose()
                stop = decided.stop
                assert stop is not None, "the turns end when one decides the run stops"
            except Interrupted as interrupted:
                stop = _stop_for(interrupted.interrupt)
            except asyncio.CancelledError:
                self._close_open_calls("the run was cancelled")
                raise
            except TetherError as error:
                stop = Stop(_reason_for(error), str(error), error)
            except Exception as error:  # noqa: BLE001 - a bug in a provider: the run still answers
                stop = Stop(StopReason.ERROR, f"unexpected {type(error).__name__}: {error}", error)
            answer = decided.answer
            for result in self._close_open_calls(_why(stop)):
                yield self._emit(ToolResultReceived(result, self._turn_no))
            if stop.reason in SUMMARIZED_STOPS and not decided.asked:
                summary = Decision()
                async with aclosing(self._summarize(summary)) as summary_events:
                    async for event in summary_events:
                        yield event
                stop, answer = summary.stop or stop, summary.answer
            if self.checkpoint is not None:
                stop = await self._save() or stop
            yield self._emit(RunCompleted(self._finish(stop, answer)))
        finally:
            if alarm is not None:
                alarm.clear(self)
            interrupter.close()
            if self.result is None:  # the consumer left early, or the host cancelled the task
                self._close_open_calls("the run was cancelled")
                self._notify(RunCompleted(self._finish(Stop(StopReason.CANCELLED, "the run was abandoned"), answer)))
                with contextlib.suppress(BaseException):
                    await asyncio.shield(self._save())
            self._unlink()

    def _run_timed_out(self) -> None:
        """The run's deadline passed (the alarm's callback, withdrawn when the run ends)."""
        self.interrupter.request(deadline_passed("run_timeout", self.spec.limits.run_timeout))

    def finished_result(self) -> RunResult | None:
        """The result once the run has completed, else ``None`` (``RunStream.result``; a bound method is one
        object per run where a closure over the run is three)."""
        return self.result

    def _unlink(self) -> None:
        """Drop the run's references to itself (its retry callback, its window's measure of the fixed part of a
        request), so that a finished run is freed by reference counting as soon as its result is let go: the
        cyclic collector never has to find it, which with thousands of runs alive is what made a step cost more
        (``bench/objects.py``)."""
        self._on_retry = _ignore_retry
        self.window.unlink()

    async def _save(self) -> Stop | None:
        """Hand the transcript and usage to the checkpoint (a session store); a failure stops the run."""
        if self.checkpoint is None:
            return None
        try:
            if self.outputs is not None:
                await self.outputs.flush()  # first: a saved transcript never names an output its store lacks
            await self.checkpoint(tuple(self.transcript), self.guard.usage)
        except Exception as error:  # noqa: BLE001 - reported as the run's error: the session could not be saved
            return Stop(StopReason.ERROR, f"could not save the session: {type(error).__name__}: {error}", error)
        return None

    def _offer(self, definitions: tuple[ToolDefinition, ...]) -> None:
        """The tools the model is shown from now on, natively or in the JSON action protocol."""
        self.definitions = definitions
        spec = self.spec
        self.actions = None
        if spec.tool_mode == "json":
            schema = spec.provider.info.supports_json_schema
            self.actions = ActionProtocol(self.system_text, definitions, use_schema=schema, call_id=self._call_id)

    def _call_id(self) -> str:
        """The id of the next call read from a JSON action: the run id and a count, so unique in the run and
        the same when a durable run is executed again (its tool steps are named by call id)."""
        self._action_calls += 1
        digest = hashlib.sha256(f"{self.run_id}:{self._action_calls}".encode()).hexdigest()
        return f"call_{digest[:24]}"

    def _offer_reader(self) -> None:
        """Offer the reader of kept outputs, once there is something to read (``tools/output_cache.py``)."""
        outputs = self.outputs
        if outputs is None or outputs.offered or not outputs.needed:
            return
        outputs.offered = True
        reader = outputs.tool
        self.executor.registry = ToolRegistry([*self.spec.tools, reader])
        if self.spec.permissions.offers(reader):
            self._offer((*self.definitions, ToolDefinition(reader.name, reader.description, reader.parameters)))
            if (gauge := self.window.gauge) is not None:  # every request now carries one more definition
                gauge.fixed_chars = fixed_chars(self.system_text, self.definitions)

    def _build(self, extra: Message | None = None, *, final: bool = False) -> Request:
        limits = self.spec.limits
        history = shape_history(self.window.view(), limits.max_history_messages)
        self._sent_view = history if extra is None else None
        # a used turn that did not end the run called a tool: a required choice has been kept
        choice: ToolChoice = "none" if final else choice_for_turn(self.spec.tool_choice, called=self.guard.turns > 0)
        if self.actions is not None:
            return self.actions.request(
                history, extra, final=final, choice=choice, settings=self.spec.settings,
                timeout=limits.request_timeout, deadline=self.deadline, on_retry=self._on_retry,
            )  # fmt: skip
        return Request(
            messages=history if extra is None else (*history, extra),
            system=self.system_text,
            tools=self.definitions,
            tool_choice=choice,
            settings=self.spec.settings,
            timeout=limits.request_timeout,
            deadline=self.deadline,
            on_retry=self._on_retry,
        )

    # --- act and check ------------------------------------------------------------------------------------

    async def _turns(self, decided: Decision) -> AsyncGenerator[RunEvent, None]:
        """Turn after turn until one decides that the run stops: each asks until the answer is usable (or the
        retries run out), then acts on it. ``decided`` says why the run stops and with which answer (the only
        place a turn's stop is decided); a failed save or a sink that raised stops it too.

        One generator for the whole run, not one a turn: asyncio tracks every async generator (a hook and a weak
        set), which cost each tool turn about 8,000 instructions more (``bench/instructions.py``)."""
        guard = self.guard
        while True:
            self._turn_no = turn_no = guard.turns + 1
            had = guard.repeated
            answer_only = bool(had)  # the model asked again for results it has: now it may only answer
            extra: Message | None = None
            attempt = 0
            recovered = False  # a context_overflow is compacted and retried once a turn
            while True:
                attempt += 1
                self.interrupter.check()
                # asked only with a context budget: awaiting a coroutine that returns at once costs a turn ~1,500
                if self.window.budget is not None and (compacted := await self._compact_if_needed(turn_no)):
                    yield self._emit(compacted)
                yield self._emit(TurnStarted(turn_no, attempt, final=answer_only))
                self.recorder.begin_call()
                try:
                    request = self._build(extra, final=answer_only)
                    stream_events = self._infer(request, turn_no, attempt, answer_only)
                    try:
                        async for event in stream_events:
                            yield event
                    finally:
                        await stream_events.aclose()
                except Exception as failure:
                    yield self._emit(self._failed_turn(turn_no, attempt, answer_only, failure))
                    if not recovered and (compacted := await self._recover(failure, turn_no)):
                        recovered = True
                        yield self._emit(compacted)
                        continue
                    if recovered and isinstance(failure, ContextOverflow):
                        raise still_too_long(failure) from failure
                    raise
                assert self._accumulated is not None
                read = self._read(self._accumulated, final=answer_only)
                turn, problem = read.turn, read.problem
                if read.shown:
                    yield self._emit(TextDelta(read.shown))
                yield self._emit(self._completed(turn_no, attempt, answer_only, turn, problem))
                if problem is None:
                    break
                if stop := guard.record_invalid(problem, self._stream_error):
                    if answer_only and stop.reason is StopReason.INVALID_RESPONSE:
                        decided.stop_with(_unanswered_repeat(had, problem), answer_from_results(had), asked=True)
                    else:
                        decided.stop_with(stop)
                    return
                extra = correction(problem, answer_only=answer_only)
            guard.record_turn()
            self.transcript.append(turn.message)
            if read.asks_user:
                decided.stop_with(Stop(StopReason.ASK_USER, "the model asked the user a question"), turn.text)
                return
            if not turn.tool_calls:
                decided.stop_with(Stop(StopReason.COMPLETE, "the model answered"), turn.text)
                return
            calls = turn.tool_calls
            batch = self._batch = ToolBatch(calls, guard.admit(calls))
            executor = self.executor  # executor.run's steps, inline: the events pass through no generator of their own
            for group in executor.groups(batch):
                for started in executor.starting(batch, group, turn_no):
                    yield self._emit(started)
                await executor.settle(batch, group)
                for reported in executor.reporting(batch, group, turn_no):
                    yield self._emit(reported)
            self._acted(batch)
            stop, answer = self._after_tools(batch)
            # this frame lives as long as the run: while it waits for its next answer it keeps nothing of this turn
            # (the transcript has what matters). All are bound: a turn with calls has a group and an event of each.
            del turn, read, batch, group, started, reported
            stop = stop or self._sink_stop()
            if stop is None and self.checkpoint is not None:  # no coroutine for a run that saves nothing
                stop = await self._save()
            decided.stop_with(stop, answer)
            if decided.stop is not None:
                return

    def _after_tools(self, batch: ToolBatch) -> tuple[Stop | None, str | None]:
        """Whether the run stops once a turn's tool calls are all answered, and the answer it stops with."""
        if batch.done is not None:
            return Stop(StopReason.DONE_TOOL, f"tool {batch.done_by!r} ended the run"), batch.done.message
        if after_turn := self.interrupter.after_turn:
            return _stop_for(after_turn), None
        return self.guard.after_turn(), None

    def _acted(self, batch: ToolBatch) -> None:
        """A turn's tool calls were all answered: their results join the transcript, the records and the guard."""
        results = batch.ordered_results("the run was cancelled")
        self.transcript.append(Message("tool", tuple(results)))
        self.recorder.attach_calls(results, batch.durations)
        self._batch = None
        self.guard.record_results(batch.calls, results)
        self._offer_reader()

    # --- finish -------------------------------------------------------------------------------------------

    async def _summarize(self, decided: Decision) -> AsyncGenerator[RunEvent, None]:
        """The last, tools-off call after a step limit; its answer becomes the run's text if it has one.

        ``decided`` gets the answer, or a stop only when an interrupt (cancel, run deadline) cut the call short.
        """
        if (pending := self.interrupter.pending) is not None:
            decided.stop_with(_stop_for(pending))
            return
        turn_no = self.guard.turns + 1
        try:
            if compacted := await self._compact_if_needed(turn_no, final=True):
                yield self._emit(compacted)
        except Interrupted as interrupted:
            decided.stop_with(_stop_for(interrupted.interrupt))
            return
        except TetherError:
            return
        yield self._emit(TurnStarted(turn_no, final=True))
        self.recorder.begin_call()
        try:
            request = self._build(summary_request(), final=True)
            async with aclosing(self._infer(request, turn_no, 1, True)) as stream_events:
                async for event in stream_events:
                    yield event
        except Exception as failure:  # noqa: BLE001 - the fallback text says why the run stopped: that is the answer
            yield self._emit(self._failed_turn(turn_no, 1, True, failure))
            if isinstance(failure, Interrupted):
                decided.stop_with(_stop_for(failure.interrupt))
            return
        assert self._accumulated is not None
        read = self._read(self._accumulated, final=True)
        turn, problem = read.turn, read.problem
        if read.shown:
            yield self._emit(TextDelta(read.shown))
        yield self._emit(self._completed(turn_no, 1, True, turn, problem))
        if problem is None:
            self.transcript.append(turn.message)
            decided.answer = turn.text

    def _finish(self, stop: Stop, answer: str | None) -> RunResult:
        """The run's result: ``stop`` says why it ended, ``answer`` is the text the deciding step gave, if any."""
        stop = self._masked(stop)
        degraded = stop.reason not in ANSWERED_STOPS
        if stop.reason in SUMMARIZED_STOPS:
            text = answer or fallback_text(stop.reason, stop.detail)
        else:
            text = answer if answer is not None else self._best_effort
            if degraded and not text.strip():
                text = fallback_text(stop.reason, stop.detail)
        guard = self.guard
        self.result = RunResult(
            text=text,
            stop_reason=stop.reason,
            messages=tuple(self.transcript),
            usage=guard.usage,
            degraded=degraded,
            detail=stop.detail,
            error=stop.error,
            turns=guard.turns,
            turn_usage=tuple(self.turn_usage),
            cost=guard.cost,
            run_id=self.run_id,
            first_new_message=self.first_new,
            turn_records=self.recorder.records(),
            duration_ms=self.recorder.run_ms(),
        )
        if self.observer is not None:
            self.observer.run_ended(self.result)
        return self.result

    def _masked(self, stop: Stop) -> Stop:
        """``stop`` with known keys masked in its detail and its error: whatever ended the run (a provider
        error quoting the key, a store's or a sink's exception) reaches the result, the CLI and the logs."""
        masker = self.spec.masker
        if not len(masker):
            return stop
        if stop.error is not None:
            mask_exception_in_place(stop.error, masker)
        detail = masker.mask(stop.detail)
        return stop if detail == stop.detail else replace(stop, detail=detail)

    def _close_open_calls(self, why: str) -> list[ToolResult]:
        """Answer every call that has no result (the transcript must stay valid); returns the results not
        yet announced of calls whose start was, so that every ``ToolCallStarted`` gets its result event."""
        batch, self._batch = self._batch, None
        if batch is not None:
            results = batch.ordered_results(why)
            announced = [r for r in results if r.call_id in batch.started and r.call_id not in batch.reported]
            self.recorder.attach_calls(results, batch.durations)
        else:
            results = [cancelled_result(call, why) for call in open_tool_calls(self.transcript)]
            announced = []
        if results:
            self.transcript.append(Message("tool", tuple(results)))
        return announced

    # --- events -------------------------------------------------------------------------------------------

    def _emit(self, event: RunEvent) -> RunEvent:
        if self.sinks:
            self._notify(event)
        return event

    def _notify(self, event: RunEvent) -> None:
        """Hand an event to every sink; a sink that raises is dropped and the run stops after this step."""
        for sink in self.sinks:
            try:
                sink(event)
            except Exception as error:  # noqa: BLE001 - reported as the run's error, not lost
                self.sinks = tuple(kept for kept in self.sinks if kept is not sink)
                self.sink_error = self.sink_error or error

    def _sink_stop(self) -> Stop | None:
        error = self.sink_error
        if error is None:
            return None
        return Stop(StopReason.ERROR, f"an event sink raised {type(error).__name__}: {error}", error)


def new_run_id() -> str:
    """A run's id: 32 hex digits of a random version-4 UUID, as ``uuid.uuid4().hex`` writes it, for a sixth of its
    cost (the ``UUID`` class checks and keeps what a run id never needs; a run makes one before it starts)."""
    value = int.from_bytes(os.urandom(16), "big") & _UUID4_KEEP | _UUID4_SET
    return f"{value:032x}"


_UUID4_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
"""The random bits of a UUID: all but its version (4 bits) and its variant (2 bits)."""
_UUID4_SET = (4 << 76) | (0x8000 << 48)
"""Version 4, variant RFC 4122 (``uuid.UUID(int=..., version=4)`` sets the same bits)."""


def _ignore_retry(error: ProviderError, attempt: int, wait: float) -> None:
    """The retry callback of a finished run."""


def _unanswered_repeat(had: Sequence[ToolResult], problem: str) -> Stop:
    names = ", ".join(dict.fromkeys(result.name for result in had))
    detail = f"the model asked again for the calls it had the results of ({names}), then gave no usable answer: "
    return Stop(StopReason.CONSECUTIVE_ERRORS, detail + problem)


def _stop_for(interrupt: Interrupt) -> Stop:
    return Stop(interrupt.reason, interrupt.detail, interrupt.error)


def _reason_for(error: TetherError) -> StopReason:
    return StopReason.TIMEOUT if error.code == "timeout" else StopReason.ERROR


def _why(stop: Stop) -> str:
    return "the run was cancelled" if stop.reason is StopReason.CANCELLED else f"the run stopped: {stop.detail}"
