"""The turn loop: start, build, infer, accumulate, act, check, finish (ARCHITECTURE.md, "A run").

A :class:`Run` is one execution of an agent. :meth:`Run.events` is an async generator of ``RunEvent``s and the
only driver of the loop: ``Agent.run()`` consumes it to its ``RunCompleted``. A run is composed of parts that
each own one job:

* ``state.py``: the transcript, the turn under way, the tool calls in flight, the best answer so far;
* ``offer.py``: the tools the model is shown and the requests that carry them (build);
* ``call.py``: one provider call per request, its deltas passed straight through, its outcome a value
  (infer, accumulate), counted in the guard and the records;
* ``compactor.py``: the model's view of the transcript, kept inside its window;
* ``executor.py``: the tool calls of a turn (act); ``guard.py``: the limits (check).

Each step returns what it decided, a :class:`Decided` (the last item of a step's events, when it has events):
:meth:`Run._turns` (one generator for the whole run, which asyncio tracks once) asks until the answer is usable
(retrying an unusable one with a correction), stores it and runs its tool calls (:meth:`Run._acted`: the checks
after them); :meth:`Run._ended` goes on with an answer cut at the output limit (``continuation.py``);
:meth:`Run._summarize` makes the one tools-off call after a step limit. After a turn that asked again
for calls whose results the model already had (``repeats.py``), the next request allows only an answer. An
exception out of a step (an interrupt, a provider's error) is the only other way a run stops.

Whatever happens, the run ends with ``RunCompleted`` and a valid transcript; see ``interrupts.py`` for the
cancellation contract and ``guard.py`` for the limits'.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Sequence
from itertools import count
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec.structs import replace

from tether.errors import ContextOverflow, TetherError
from tether.events import RunCompleted, RunEvent, RunResult, RunStarted, TextDelta, ToolResultReceived, TurnStarted
from tether.limits import StopReason
from tether.loop.accumulator import AccumulatedTurn
from tether.loop.actions import Interpreted
from tether.loop.call import CallOutcome, Calls, ProviderCall
from tether.loop.compactor import Compactor, still_too_long
from tether.loop.context import correction, fallback_text, summary_request
from tether.loop.continuation import Continuation, Continued, continued_detail, cut_detail
from tether.loop.executor import ToolBatch, ToolExecutor
from tether.loop.guard import LoopGuard, Stop, reason_for, unanswered_repeat, why_closed
from tether.loop.interrupts import Interrupt, Interrupted, Interrupter, deadline_passed
from tether.loop.nesting import Nesting, NestingExecutor
from tether.loop.offer import Offer
from tether.loop.outputs import OutputJudge
from tether.loop.pausing import Resumed, marked, paused_state, resumed_batch, resumed_state, settled, time_left
from tether.loop.progress import RunProgress, system_text
from tether.loop.repeats import Verdict, answer_from_results
from tether.loop.saving import Checkpoint, Saves
from tether.loop.sinks import NO_SINKS, EventSink, Sinks
from tether.loop.spec import RunSpec
from tether.loop.state import RunState
from tether.loop.steps import elapsed, new_run_id
from tether.messages import Message, Prompt, ToolCall, ToolResult
from tether.providers.base import ToolDefinition
from tether.secrets import mask_exception_in_place
from tether.telemetry.observer import RunInfo
from tether.tools.output_cache import OutputCache
from tether.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from tether.loop.steps import StepRunner
    from tether.paused import PausedRun
    from tether.sessions.base import OutputStore
    from tether.telemetry.observer import RunObserver

__all__ = ["Checkpoint", "Decided", "EventSink", "Run", "new_run_id"]

SUMMARIZED_STOPS = frozenset({StopReason.MAX_TURNS, StopReason.MAX_TOOL_CALLS, StopReason.CONSECUTIVE_ERRORS})
"""Step limits: the model has not answered yet, so the loop asks it once more, without tools."""
ANSWERED_STOPS = frozenset({StopReason.COMPLETE, StopReason.DONE_TOOL, StopReason.ASK_USER})
WHOLE_STOPS = ANSWERED_STOPS | {StopReason.PAUSED}  # not degraded: an answer, or a pause for decisions


class Decided(msgspec.Struct, frozen=True):
    """What a step decided: the last item of its events. ``stop`` ``None``: the run goes on."""

    stop: Stop | None = None
    answer: str | None = None
    """The run's answer, when the step that stopped it has one."""
    asked: bool = False
    """The model was already asked, tools off, for an answer it could not give: no summary call after."""


GOES_ON = Decided()


class Run:
    """One run of an agent; iterate :meth:`events` once."""

    __slots__ = (
        "__weakref__", "calls", "compactor", "executor", "guard", "interrupter", "judge", "observer", "offer",
        "outputs", "paused", "progress", "result", "resumed", "run_id", "saves", "session_id", "sinks", "spec",
        "state", "steps",
    )  # fmt: skip
    """Slots, not a dict: a run in flight is a few hundred bytes smaller and its attributes quicker to read."""

    def __init__(
        self,
        spec: RunSpec,
        prompt: Prompt | None,
        history: Sequence[Message],
        interrupter: Interrupter,
        sinks: Sequence[EventSink] = (),
        checkpoint: Checkpoint | None = None,
        session_id: str | None = None,
        output_store: OutputStore | None = None,
        steps: StepRunner | None = None,
        deps: Any = None,
        resumed: Resumed | None = None,
    ) -> None:
        self.spec = spec
        self.steps = steps
        """Runs each provider call and tool call as a durable step (``loop/steps.py``); ``None``: directly."""
        self.session_id = session_id
        self.interrupter = interrupter
        self.run_id = steps.run_id if steps is not None else new_run_id()
        self.resumed = resumed  # the paused run this one goes on with, until its calls are settled (pausing.py)
        self.paused: PausedRun | None = None
        self.state = RunState(spec.system, history, prompt) if resumed is None else resumed_state(spec, resumed)
        self.guard = LoopGuard(spec.limits, spec.price, repeatable=spec.is_repeatable)
        if resumed is not None:
            self.run_id = resumed.state.run_id
            self.guard.resume(resumed.state)
        self.progress = (
            RunProgress(self.run_id, deps, self.state, self.guard)
            if spec.takes_context or spec.system_function is not None or spec.output is not None
            else None
        )
        """The run as a tool's or the instructions' context reads it; ``None`` when nothing asks for a context."""
        self.judge = OutputJudge(spec, self.progress) if spec.output is not None and self.progress else None
        """The run's typed output, found and validated (``outputs.py``); ``None``: the answer's text."""
        self.observer: RunObserver | None = spec.observe() if spec.observe is not None else None
        self.outputs = (
            OutputCache(spec.cache_tool_outputs, cap=spec.max_tool_output, store=output_store, session_id=session_id)
            if spec.cache_tool_outputs is not None
            else None
        )
        """Long tool outputs kept whole (in ``output_store`` too, when the run is in a session)."""
        self.saves = Saves(checkpoint, self.outputs, spec.save_errors) if checkpoint is not None else None
        """The run's saves (``saving.py``); ``None``: the run is not in a session."""
        self.executor = (NestingExecutor if spec.nests else ToolExecutor)(
            spec.tools, interrupter, timeout=spec.limits.tool_timeout, concurrent_tools=spec.concurrent_tools,
            max_concurrency=spec.max_concurrency, permissions=spec.permissions, max_output=spec.max_tool_output,
            masker=spec.masker, observer=self.observer, redaction=spec.redaction, outputs=self.outputs, steps=steps,
            contexts=self.progress, reads=spec.provider.info.input_kinds, unknown_tool=spec.unknown_tool,
        )  # fmt: skip
        self.sinks = Sinks(sinks) if sinks else NO_SINKS
        self.calls = Calls(spec, interrupter, self.guard, self.observer, self.sinks, steps)
        self.offer = Offer(spec, self.state.system_text, self.run_id, self.calls.retried, self.calls.waited)
        self.offer.cache_key = session_id
        if spec.nests:  # it runs agents as tools: they share its steps, budget and events (``nesting.py``)
            self._nest()
        self.compactor = Compactor(self.state, self.offer, self.calls)
        if (history or resumed) and self.outputs is not None and self.outputs.notice(self.state.transcript):
            self._offer_reader()  # only a history has results to read
        self.result: RunResult | None = None

    def _nest(self) -> None:
        """Make the run's :class:`Nesting`, reached by its executor and by the tools that run agents."""
        nesting = Nesting(self.guard, self.interrupter, self.offer, self.calls.recorder, self.steps)
        assert isinstance(self.executor, NestingExecutor)
        assert self.progress is not None, "a tool that runs an agent takes the run's context"
        self.executor.nesting = self.progress.nesting = nesting

    # --- start and finish ---------------------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[RunEvent, None]:
        """Run the loop, yielding its events; ends with ``RunCompleted`` (unless the consumer leaves early)."""
        self.interrupter.attach()
        timed = await self._arm_run_deadline()
        decided = GOES_ON
        try:
            self.calls.recorder.run_started = time.perf_counter()
            if self.observer is not None:
                self.observer.run_started(self._info())
            yield self._emit(RunStarted(self.run_id, self.spec.provider.info.model_string, self.state.prompt))
            turns = self._turns() if self.spec.system_function is None else self._instructed()
            if self.resumed is not None:  # the paused turn's calls settled first, as decided
                turns = self._resume(self.resumed, turns)
            try:
                async for item in turns:
                    if isinstance(item, Decided):
                        decided = item
                    else:
                        yield item
            except Interrupted as interrupted:
                decided = Decided(_stop_for(interrupted.interrupt), decided.answer)
            except asyncio.CancelledError:
                self.state.close_open_calls("the run was cancelled")
                raise
            except TetherError as error:
                decided = Decided(Stop(reason_for(error), str(error), error))
            except Exception as error:  # noqa: BLE001 - a bug in a provider: the run still answers
                decided = Decided(Stop(StopReason.ERROR, f"unexpected {type(error).__name__}: {error}", error))
            finally:
                await turns.aclose()  # before what follows: each step ends before the run does
            end = self._end(decided)
            try:
                async for event in end:
                    yield event
            finally:
                await end.aclose()
        finally:
            if timed:
                self.interrupter.alarm.clear(self)
            self.interrupter.close()
            if isinstance(self.executor, NestingExecutor):  # calls still settling when the consumer left
                await self.executor.nesting.close()
            if self.result is None:  # the consumer left early, or the host cancelled the task
                self.state.close_open_calls("the run was cancelled")
                self.sinks(RunCompleted(self._finish(Stop(StopReason.CANCELLED, "the run was abandoned"), None)))
                with contextlib.suppress(BaseException):
                    await asyncio.shield(self._save())

    async def _end(self, decided: Decided) -> AsyncGenerator[RunEvent, None]:
        """The run stops as ``decided`` says: the calls left open answered, the summary call after a step limit,
        the last save, and ``RunCompleted``."""
        stop = decided.stop
        assert stop is not None, "the turns end when one decides the run stops"
        for result in (
            self._close_open_calls(why_closed(stop)) if self.paused is None else ()
        ):  # pending calls stay open
            yield self._emit(ToolResultReceived(result, self.state.turn))
        answer = decided.answer
        if stop.reason in SUMMARIZED_STOPS and not decided.asked:
            summary = self._summarize()
            try:
                async for item in summary:
                    if isinstance(item, Decided):
                        stop, answer = item.stop or stop, item.answer
                    else:
                        yield item
            finally:
                await summary.aclose()
        compactor = self.compactor
        if stop.reason in ANSWERED_STOPS and compactor.window.budget is not None:  # leave it ready for the next run
            compacted = await compactor.after_answer(self.guard.turns + 1, in_session=self.saves is not None)
            if compacted is not None:
                yield self._emit(compacted)
        if self.saves is not None:
            stop = await self._save() or stop
        yield self._emit(RunCompleted(self._finish(stop, answer)))

    async def _instructed(self) -> AsyncGenerator[RunEvent | Decided, None]:
        """The turns of a run whose system prompt is a function of its context: the function first."""
        assert self.progress is not None, "a run with a system function has a progress"
        system = await self.interrupter.wait(system_text(self.spec, self.progress.context()))
        self.state.instruct(system)
        self.offer.instruct(system)
        self.compactor = Compactor(self.state, self.offer, self.calls)  # nothing was sent: its window starts anew
        turns = self._turns()
        try:
            async for item in turns:
                yield item
        finally:
            await turns.aclose()

    async def _arm_run_deadline(self) -> bool:
        """Keep ``run_timeout`` on the loop's one alarm, under the run's own key; whether there is one. A durable
        run's counts from its first start (``steps.py``: :func:`~tether.loop.steps.elapsed`)."""
        limits = self.spec.limits
        if limits.run_timeout is None:
            return False
        spent = 0.0 if self.steps is None else await elapsed(self.steps)
        alarm = self.interrupter.alarm  # a resumed run has what its pause left it
        self.offer.deadline = alarm.time() + time_left(self.resumed, limits.run_timeout - spent)
        alarm.set(self, self.offer.deadline, self._run_timed_out)
        return True

    def _run_timed_out(self) -> None:
        """The run's deadline passed (the alarm's callback, withdrawn when the run ends)."""
        self.interrupter.request(deadline_passed("run_timeout", self.spec.limits.run_timeout))

    def _info(self) -> RunInfo:
        """What the run's observer is told of it when it starts."""
        spec, info, state = self.spec, self.spec.provider.info, self.state
        return RunInfo(
            run_id=self.run_id, provider=info.provider, model=info.name, prompt=state.prompt,
            system=state.system_text, tools=self.offer.definitions, settings=spec.settings,
            tool_mode=spec.tool_mode, history=state.history(), agent_name=spec.agent_name,
            session_id=self.session_id, server_address=spec.server[0], server_port=spec.server[1],
        )  # fmt: skip

    async def _save(self) -> Stop | None:
        """Save the transcript and usage (``saving.py``): the stop a failure decides, if any."""
        if self.saves is None:
            return None
        return await self.saves.save(marked(self.state.transcript, self.paused), self.guard.usage)

    def _finish(self, stop: Stop, answer: str | None) -> RunResult:
        """The run's result: ``stop`` says why it ended, ``answer`` is the text the deciding step gave, if any."""
        stop, unsaved = self.saves.marked(stop) if self.saves is not None else (stop, False)
        stop = self._masked(stop)
        degraded = unsaved or stop.degraded or stop.reason not in WHOLE_STOPS
        if stop.reason in SUMMARIZED_STOPS:
            text = answer or fallback_text(stop.reason, stop.detail)
        else:
            text = answer if answer is not None else self.calls.last_text
            if degraded and not text.strip():
                text = fallback_text(stop.reason, stop.detail)
        guard, recorder = self.guard, self.calls.recorder
        self.result = RunResult(
            text=text, stop_reason=stop.reason, messages=tuple(self.state.transcript), usage=guard.usage,
            degraded=degraded, detail=stop.detail, error=stop.error, turns=guard.turns,
            turn_usage=tuple(self.calls.turn_usage), cost=guard.cost, run_id=self.run_id, duration_ms=recorder.run_ms(),
            first_new_message=self.state.first_new, turn_records=recorder.records(self.spec.price),
            output=text if self.judge is None else self.judge.output, finish_reason=recorder.answer_finish(),
            last_agent=self.spec.agent_name, pending=self.paused.pending if self.paused else (), state=self.paused,
        )  # fmt: skip
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
        """Answer every call that has no result; the results not yet announced of calls whose start was, so
        that every ``ToolCallStarted`` gets its result event."""
        results, announced, durations = self.state.close_open_calls(why)
        if durations is not None:
            self.calls.recorder.attach_calls(results, durations)
        return announced

    def _emit(self, event: RunEvent) -> RunEvent:
        if self.sinks.sinks:
            self.sinks(event)
        return event

    # --- a turn: ask, then act ---------------------------------------------------------------------------

    async def _turns(self) -> AsyncGenerator[RunEvent | Decided, None]:
        """Turn after turn until one decides the run stops (its last item); one generator, which asyncio tracks."""
        guard, state, calls, offer, compactor = self.guard, self.state, self.calls, self.offer, self.compactor
        while True:
            turn_no = state.turn = guard.turns + 1
            extra, recovered, final = None, False, bool(had := guard.repeated)  # repeated: only an answer
            for attempt in count(1):
                self.interrupter.check()
                if compactor.window.budget is not None and (compacted := await compactor.before(turn_no)):
                    yield self._emit(compacted)
                yield self._emit(TurnStarted(turn_no, attempt, final=final))
                request, view = offer.turn(compactor.view(), extra, final=final, called=guard.turns > 0)
                call = ProviderCall(calls, request, turn_no, attempt, final=final, view=view)
                deltas = call.deltas(offer.actions)
                try:
                    async for delta in deltas:
                        yield delta
                except Exception as failure:  # noqa: BLE001 - raised again unless compaction recovers the turn
                    async for event in self._failed(call, failure, recovered):
                        yield event
                    recovered = True
                    continue
                finally:
                    await deltas.aclose()  # the call's outcome is kept however its consumer left
                read = calls.read(self._outcome(call), final=final, actions=offer.actions)
                if read.shown:
                    yield self._emit(TextDelta(read.shown))
                yield self._emit(calls.completed(call, read.turn, read.problem))
                if (problem := read.problem) is None:
                    break
                yield self._emit(calls.rejected(call, problem, rejected := self._rejected(problem, call, had, final)))
                if isinstance(rejected, Decided):  # retried with a correction, or stopped, as decided
                    yield rejected
                    return
                extra = rejected
            guard.record_turn()
            state.answered(read.turn.message)
            if not read.turn.tool_calls or read.asks_user:
                decided = _answered(read) if self.judge is None or read.asks_user else await self._output_of(read)
                if decided.stop is None:
                    continue
                async for item in self._ended(read.turn, decided):
                    yield item
                return
            asked = read.turn.tool_calls  # a typed output's calls are answered first: the executor runs the others
            batch = state.start_batch(asked, guard.admit(asked) if self.judge is None else await self._verdicts(asked))
            for group in (executor := self.executor).groups(batch):
                if executor.asking and executor.asks(batch, group):  # a hook or an approver, before the calls start
                    await executor.permit(batch, group)
                for started in executor.starting(batch, group, turn_no):
                    yield self._emit(started)
                while (relayed := await executor.settle(batch, group)) is not None:  # an agent's, as it runs
                    yield self._emit(relayed)
                for reported in executor.reporting(batch, group, turn_no):
                    yield self._emit(reported)
            decided = await self._acted(batch)
            del read, asked, batch, group  # the frame outlives the turn, and keeps none of it
            if decided.stop is not None:
                yield decided
                return

    async def _ended(self, turn: AccumulatedTurn, decided: Decided) -> AsyncGenerator[RunEvent | Decided, None]:
        """The run stops with the answer ``turn`` as ``decided``; an answer as text cut at the output limit is
        continued first (``continuation.py``), and the stop is what that decides."""
        if turn.finish_reason != "length" or not _plain(decided, self.judge):
            yield decided
            return
        continuation = Continuation(
            self.calls, self.offer, self.state, self.guard, self.interrupter, self.compactor.view, self._emit
        ).events(turn)
        try:
            async for item in continuation:
                if not isinstance(item, Continued):
                    yield item
                elif item.interrupt is not None:
                    yield Decided(_stop_for(item.interrupt), item.text)
                elif item.cut:
                    yield Decided(Stop(StopReason.COMPLETE, cut_detail(item), degraded=True), item.text)
                else:
                    yield Decided(Stop(StopReason.COMPLETE, continued_detail(item)), item.text)
        finally:
            await continuation.aclose()

    async def _failed(self, call: ProviderCall, failure: Exception, recovered: bool) -> AsyncGenerator[RunEvent, None]:
        """A failed call's ``TurnCompleted`` and ``CallFailed``. Its turn goes on only after a ``context_overflow``
        that compaction made room for (once a turn): the ``Compacted`` it made follows. Any other failure is
        raised again (after its ``CallFailed``); a second overflow is ``still_too_long``."""
        yield self._emit(self.calls.failed(call, failure))
        compacted = None if recovered else await self.compactor.after(failure, call.turn)
        if (failed := self.calls.failure(call, failure, "compact" if compacted else "stop")) is not None:
            yield self._emit(failed)
        if compacted:
            yield self._emit(compacted)
            return
        if recovered and isinstance(failure, ContextOverflow):
            raise still_too_long(failure) from failure
        raise failure

    def _rejected(self, problem: str, call: ProviderCall, had: Sequence[ToolResult], final: bool) -> Message | Decided:
        """An unusable answer: the correction to ask again with, or, once the corrective retries (or the budget)
        run out, the stop it decides (after a repeated call, the results the model had are the answer)."""
        stop = self.guard.record_invalid(problem, self._outcome(call).error)
        if stop is None:
            return correction(problem, answer_only=final)
        if final and stop.reason is StopReason.INVALID_RESPONSE:
            return Decided(unanswered_repeat(had, problem), answer_from_results(had), asked=True)
        return Decided(stop)

    async def _acted(self, batch: ToolBatch) -> Decided:
        """A turn's tool calls were all answered: their results join the transcript, the records and the guard;
        then the checks, and the session saved. What the turn decided: a pause, when calls wait on decisions."""
        if batch.pending and batch.done is None:
            self.paused, paused = paused_state(self, batch)
            return Decided(paused)
        guard = self.guard
        results = self.state.end_batch(batch)
        self.calls.recorder.attach_calls(results, batch.durations)
        guard.record_results(batch.calls, results)
        self._offer_reader()
        stop, answer = self._after_tools(batch)
        stop = stop or self.sinks.stop()
        if stop is None and self.saves is not None:  # no coroutine for a run that saves nothing
            stop = await self._save()
        return Decided(stop, answer)

    async def _resume(
        self, resumed: Resumed, turns: AsyncGenerator[RunEvent | Decided, None]
    ) -> AsyncGenerator[RunEvent | Decided, None]:
        """The paused turn's calls settled as decided (``pausing.py``), then the ``turns`` unless the run stops."""
        self.resumed = None
        try:
            batch = self.state.start_batch(*resumed_batch(resumed))
            async for event in settled(self.executor, batch, self.state.turn, self.judge):
                yield self._emit(event)
            if (decided := await self._acted(batch)).stop is not None:
                yield decided
                return
            async for item in turns:
                yield item
        finally:
            await turns.aclose()

    @staticmethod
    def _outcome(call: ProviderCall) -> CallOutcome:
        """What a call that ended gave (set when its stream is over)."""
        assert call.outcome is not None, "a call's outcome is set when its stream is over"
        return call.outcome

    async def _verdicts(self, calls: Sequence[ToolCall]) -> list[Verdict]:
        """The guard's verdicts on a turn's calls, with the typed output's calls answered by the judge."""
        assert self.judge is not None, "only a run with a typed output has output calls"
        return await self.interrupter.wait(self.judge.verdicts(calls, self.guard.admit(calls)))

    async def _output_of(self, read: Interpreted) -> Decided:
        """A final answer read as the run's typed output: the run stops with it, or with ``invalid_output`` once
        the retries are spent; else the errors join the transcript and the run goes on (the guard's checks and the
        save of a tool turn, then the next turn)."""
        judge = self.judge
        assert judge is not None, "only a run with a typed output reads one"
        correction = await self.interrupter.wait(judge.answered(read.turn.message.text))
        if correction is None:
            return Decided(Stop(StopReason.COMPLETE, "the model gave its output"), judge.raw)
        if (stop := judge.stop()) is not None:
            return Decided(stop, judge.raw)
        self.state.answered(correction)
        stop = self.guard.after_turn() or self.sinks.stop()
        if stop is None and self.saves is not None:
            stop = await self._save()
        return Decided(stop)

    def _after_tools(self, batch: ToolBatch) -> tuple[Stop | None, str | None]:
        """Whether the run stops once a turn's tool calls are all answered, and the answer it stops with."""
        if batch.done is not None:
            return Stop(StopReason.DONE_TOOL, f"tool {batch.done_by!r} ended the run"), batch.done.message
        if (judge := self.judge) is not None and judge.found:
            return Stop(StopReason.COMPLETE, "the model gave its output"), judge.raw
        if judge is not None and (stop := judge.stop()) is not None:
            return stop, judge.raw
        if after_turn := self.interrupter.after_turn:
            return _stop_for(after_turn), None
        return self.guard.after_turn(), None

    def _offer_reader(self) -> None:
        """Offer the reader of kept outputs, once there is something to read (``tools/output_cache.py``)."""
        outputs = self.outputs
        if outputs is None or outputs.offered or not outputs.needed:
            return
        outputs.offered = True
        reader = outputs.tool
        self.executor.registry = ToolRegistry([*self.spec.tools, reader])
        if self.spec.permissions.offers(reader):
            self.offer.show(
                (*self.offer.definitions, ToolDefinition(reader.name, reader.description, reader.parameters))
            )
            self.compactor.tools_changed()

    async def _summarize(self) -> AsyncGenerator[RunEvent | Decided, None]:
        """The last, tools-off call after a step limit: its answer (``Decided.answer``) becomes the run's text if
        it has one; a stop only when an interrupt (cancel, run deadline) cut it short."""
        if (pending := self.interrupter.pending) is not None:
            yield Decided(_stop_for(pending))
            return
        calls, offer, turn_no = self.calls, self.offer, self.guard.turns + 1
        try:
            if compacted := await self.compactor.before(turn_no, final=True):
                yield self._emit(compacted)
        except Interrupted as interrupted:
            yield Decided(_stop_for(interrupted.interrupt))
            return
        except TetherError:
            yield GOES_ON
            return
        yield self._emit(TurnStarted(turn_no, final=True))
        request, _ = offer.turn(self.compactor.view(), summary_request(), final=True, called=True)
        call = ProviderCall(calls, request, turn_no, 1, final=True)
        deltas = call.deltas(offer.actions)
        try:
            async for delta in deltas:
                yield delta
        except Exception as failure:  # noqa: BLE001 - the fallback text says why the run stopped: that is the answer
            yield self._emit(calls.failed(call, failure))
            if (failed := calls.failure(call, failure, "stop")) is not None:
                yield self._emit(failed)
            yield Decided(_stop_for(failure.interrupt)) if isinstance(failure, Interrupted) else GOES_ON
            return
        finally:
            await deltas.aclose()
        read = calls.read(self._outcome(call), final=True, actions=offer.actions)
        if read.shown:
            yield self._emit(TextDelta(read.shown))
        yield self._emit(calls.completed(call, read.turn, read.problem))
        if read.problem is None:
            self.state.answered(read.turn.message)
            yield Decided(answer=read.turn.text)
        else:
            yield GOES_ON


def _answered(read: Interpreted) -> Decided:
    """A usable answer that asks for no tool call: the run's answer, or its question to the user."""
    if read.asks_user:
        return Decided(Stop(StopReason.ASK_USER, "the model asked the user a question"), read.turn.text)
    return Decided(Stop(StopReason.COMPLETE, "the model answered"), read.turn.text)


def _plain(decided: Decided, judge: OutputJudge | None) -> bool:
    """A run's answer as text (no typed output, no question to the user): what a continuation can add to."""
    return judge is None and decided.stop is not None and decided.stop.reason is StopReason.COMPLETE


def _stop_for(interrupt: Interrupt) -> Stop:
    return Stop(interrupt.reason, interrupt.detail, interrupt.error)
