"""One provider call, as the engine makes it: streamed under its deadlines, folded into a turn, recorded.

:class:`ProviderCalls` holds the part of a :class:`~tether.loop.engine.Run` that talks to the provider:
``_infer`` streams one call (deltas passed through as they come, usage counted even when it fails, the
step deadline and cancellation kept, see ``interrupts.py``), ``_completed`` and ``_failed_turn`` make the
``TurnCompleted`` every started call gets and keep its record, ``_read`` decides whether an answer is usable,
and ``_summary_call`` asks for the summary a compaction stands on (``context/window.py``). The loop's steps
(``engine.py``) use these and never the provider directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tether.errors import InvalidResponse, TetherError
from tether.events import LlmEvent, RunEvent, StreamStart, TextDelta, ThinkingDelta, TurnCompleted, TurnStatus
from tether.loop.accumulator import AccumulatedTurn, StreamAccumulator, rejection, without_calls
from tether.loop.actions import ActionProtocol, Interpreted
from tether.loop.context import compaction_request
from tether.loop.context.window import ContextWindow, Plan
from tether.loop.guard import LoopGuard
from tether.loop.interrupts import Interrupted, Interrupter, deadline_passed
from tether.loop.records import CallRecorder, close_stream, within
from tether.messages import Message, Text, Thinking
from tether.providers.base import ModelSettings, Request, ToolDefinition
from tether.secrets import mask_exception_in_place
from tether.usage import Usage

if TYPE_CHECKING:
    from tether.errors import ProviderError
    from tether.loop.spec import RunSpec
    from tether.loop.steps import StepRunner
    from tether.telemetry.observer import RunObserver


ONE_REQUEST = Usage(requests=1)
"""What a call adds to its own usage: the request itself (one shared instance)."""


class ProviderCalls:
    """The provider-facing steps of a run (see the module docstring); :class:`~tether.loop.engine.Run`
    sets every attribute declared here."""

    __slots__ = ("_accumulated", "_best_effort", "_sent_view", "_stream_error", "_stream_problem")
    """The state of the provider call under way (the run's other attributes are ``Run.__slots__``)."""

    spec: RunSpec
    interrupter: Interrupter
    observer: RunObserver | None
    guard: LoopGuard
    recorder: CallRecorder
    window: ContextWindow
    actions: ActionProtocol | None
    definitions: tuple[ToolDefinition, ...]
    system_text: str | None
    deadline: float | None
    turn_usage: list[Usage]
    _accumulated: AccumulatedTurn | None
    _stream_problem: str | None
    _stream_error: InvalidResponse | None
    _best_effort: str
    """Requests the step timeout's interrupt (made once per run: the alarm keeps it while a call is under way)."""
    _sent_view: tuple[Message, ...] | None
    """The history part of the request under way when it is exactly the model's view (no extra message):
    the token gauge anchors on it."""
    _on_retry: Callable[[ProviderError, int, float], None]
    sinks: Sequence[Any]

    steps: StepRunner | None

    if TYPE_CHECKING:

        def _notify(self, event: RunEvent) -> None:
            """Hands an event to the run's sinks (``Run._notify``)."""

    def _step_timed_out(self) -> None:
        """The step deadline passed (the alarm's callback; a bound method made per call, so the run keeps no
        reference to itself for it)."""
        self.interrupter.request(deadline_passed("step_timeout", self.spec.limits.step_timeout))

    def _retried(self, error: ProviderError, attempt: int, wait: float) -> None:
        """The provider retries the current call (``Request.on_retry``)."""
        self.recorder.retries += 1
        if self.observer is not None:
            mask_exception_in_place(error, self.spec.masker)  # a provider may quote the key in its error body
            self.observer.retry(error, attempt, wait)

    # --- infer and accumulate -----------------------------------------------------------------------------

    async def _infer(
        self, request: Request, turn_no: int, attempt: int, final: bool, *, quiet: bool = False
    ) -> AsyncGenerator[RunEvent, None]:
        """One provider call; leaves the turn in ``self._accumulated``. Usage is counted even if it fails.

        ``quiet``: the deltas are not passed on (a call whose text is not the run's answer: a summary for a
        compaction)."""
        interrupter, limits, observer = self.interrupter, self.spec.limits, self.observer
        context = None
        if observer is not None:
            observer.call_started(turn_no, attempt, final, request)
            context = observer.call_context()
        alarm = None
        if limits.step_timeout is not None:
            alarm = interrupter.alarm
            # keyed by the run's interrupter: a run makes one provider call at a time, on its loop's shared alarm
            alarm.set(interrupter, alarm.time() + limits.step_timeout, self._step_timed_out)
        accumulator = StreamAccumulator()
        self._accumulated = self._stream_problem = self._stream_error = None
        sinks = self.sinks
        passthrough = self.actions is None and not quiet  # in JSON action mode the text is an action, shown once read
        requested = False
        stream: AsyncIterator[LlmEvent] | None = None
        first = 0.0
        stepped: AccumulatedTurn | None = None
        try:
            if self.steps is not None:
                live: list[bool] = []  # the step ran here (its deltas reached the sinks), or was replayed
                name = f"{'compaction' if quiet else 'model'}:{turn_no}.{attempt}"
                requested = interrupter.pending is None  # else the wait raises before the provider is asked
                stepped = await interrupter.wait(self._call_as_step(name, request, context, passthrough, live))
                if passthrough:
                    for delta in _deltas(stepped.message):
                        if sinks and not live:
                            self._notify(delta)
                        yield delta
                return
            stream = self.spec.provider.stream(request)
            if context is not None:
                stream = within(stream, context)
            # Interrupter.wait's steps, in its order, around a stream whose deltas go to the host mid-wait
            interrupter.arm()  # raises if the run was interrupted before the provider was asked
            requested = True
            try:
                async for event in stream:  # armed: only this task's awaits can take a cancel, none of the host's
                    shown = accumulator.add(event)
                    if not first and type(event) is not StreamStart:
                        first = time.perf_counter()
                    if shown is not None and passthrough:
                        interrupter.armed = False  # the host's code runs now, in the sinks and at the yield
                        if sinks:
                            self._notify(shown)
                        yield shown
                        interrupter.arm()
            except asyncio.CancelledError as cancelled:
                raise interrupter.taken(cancelled) from None
            stream = None  # it ran to its end: nothing left to close
            if interrupter.fired:
                await interrupter.settle()
        except InvalidResponse as error:
            mask_exception_in_place(error, self.spec.masker)
            self._stream_problem = f"the provider sent a malformed answer ({error.message})"
            self._stream_error = error
        except TetherError as error:  # a provider may quote the key back in its error
            mask_exception_in_place(error, self.spec.masker)
            raise
        finally:
            interrupter.armed = False
            if alarm is not None:
                alarm.clear(interrupter)
            if stream is not None:
                await close_stream(stream)
            self._accumulated = turn = accumulator.finish() if stepped is None else stepped
            self._best_effort = turn.text or self._best_effort
            usage = turn.usage
            if requested:
                usage = turn.usage + ONE_REQUEST
                self.turn_usage.append(usage)
                self.guard.record_call(usage)
                if (gauge := self.window.gauge) is not None and self._sent_view is not None:
                    gauge.observe(self._sent_view, turn.usage)
            self.recorder.end_call(first, usage)

    async def _call_as_step(
        self, name: str, request: Request, context: Any, passthrough: bool, live: list[bool]
    ) -> AccumulatedTurn:
        """The provider call as the durable step ``name`` (``loop/steps.py``). Its own coroutine, so that the
        closure it hands the runner does not turn ``_infer``'s variables into cells on every call."""
        assert self.steps is not None
        return await self.steps.step(name, lambda: self._stream_step(request, context, passthrough, live))

    async def _stream_step(
        self, request: Request, context: Any, passthrough: bool, live: list[bool]
    ) -> AccumulatedTurn:
        """A provider call run to its end inside a step: the deltas go to the sinks as they come (the run's
        events get them after the step, ``_deltas``); the turn is the step's result. A malformed stream is
        raised (``InvalidResponse``) and kept by the runner like the turn."""
        live.append(True)
        accumulator = StreamAccumulator()
        stream: AsyncIterator[LlmEvent] = self.spec.provider.stream(request)
        if context is not None:
            stream = within(stream, context)
        sinks = self.sinks
        try:
            async for event in stream:
                shown = accumulator.add(event)
                if shown is not None and passthrough and sinks:
                    self._notify(shown)
        finally:
            await close_stream(stream)
        return accumulator.finish()

    def _failed_turn(
        self, turn_no: int, attempt: int, final: bool, failure: Exception, *, compaction: bool = False
    ) -> TurnCompleted:
        """The ``TurnCompleted`` of a provider call that failed or was interrupted: every turn that starts ends."""
        turn = self._accumulated
        why = describe_failure(failure)
        if turn is None:  # the turn could not even be assembled: it still completes, empty
            turn = AccumulatedTurn(Message("assistant", ()), (), (), "error", Usage(), ended=False)
        return self._completed(turn_no, attempt, final, turn, why, failure, compaction=compaction)

    def _completed(
        self,
        turn_no: int,
        attempt: int,
        final: bool,
        turn: AccumulatedTurn,
        rejected: str | None,
        failure: BaseException | None = None,
        *,
        compaction: bool = False,
    ) -> TurnCompleted:
        """The ``TurnCompleted`` of the call that just ended, with its :class:`TurnRecord` kept and observed
        (a compaction's call is recorded and observed too; its ``TurnCompleted`` is not emitted)."""
        self.recorder.record(turn_no, attempt, final, turn, rejected, failure, compaction=compaction)
        if self.observer is not None:
            self.observer.call_ended(self.recorder.last(), turn.message, failure)
        status: TurnStatus = "failed" if failure is not None else "rejected" if rejected is not None else "completed"
        return TurnCompleted(turn_no, turn.message, turn.usage, turn.finish_reason, rejected, status)

    def _read(self, turn: AccumulatedTurn, *, final: bool) -> Interpreted:
        """The turn as the loop can use it, or why it cannot be used.

        ``final`` (tools were off: the summary call, the answer asked for after a repeated turn, or any turn of
        a run whose tool choice is ``"none"``): only an answer counts, so tool calls a provider sent anyway are
        dropped, and in JSON action mode any text is the answer (a ``final`` action is unwrapped).
        """
        if self._stream_problem is not None:
            return Interpreted(turn, problem=self._stream_problem)
        final = final or self.spec.tool_choice == "none"
        if final:
            turn = without_calls(turn)
        if (problem := rejection(turn)) is not None:
            return Interpreted(turn, problem=problem)
        if self.actions is not None:
            return self.actions.interpret(turn, final=final)
        return Interpreted(turn)

    async def _summary_call(self, plan: Plan, turn_no: int) -> str | None:
        """Ask the model, tools off, for a summary of ``plan.summarized``; its text, or ``None`` when it gave
        nothing usable. Recorded like every call (``TurnRecord.compaction``); its deltas are not shown.

        Interrupts and provider failures propagate, except a ``context_overflow`` (the part to summarize
        was still too big): then ``None``, and the caller tries a smaller part.
        """
        budget = self.window.budget
        assert budget is not None
        extra = compaction_request(self.spec.compaction.instructions if self.spec.compaction else None)
        settings = self.spec.settings
        if not _has_reasoning_settings(settings):  # a thinking budget needs max_tokens above it: left alone
            settings = replace(
                settings, max_tokens=min(settings.max_tokens or budget.summary_tokens, budget.summary_tokens)
            )
        limits = self.spec.limits
        if self.actions is not None:
            request = self.actions.request(
                plan.summarized, None, final=True, ask=extra, settings=settings, timeout=limits.request_timeout,
                deadline=self.deadline, on_retry=self._on_retry,
            )  # fmt: skip
        else:
            request = Request(
                messages=(*plan.summarized, extra), system=self.system_text, tools=self.definitions,
                tool_choice="none", settings=settings, timeout=limits.request_timeout, deadline=self.deadline,
                on_retry=self._on_retry,
            )  # fmt: skip
        self._sent_view = None
        self.recorder.begin_call()
        try:
            async with aclosing(self._infer(request, turn_no, 1, True, quiet=True)) as stream_events:
                async for _ in stream_events:
                    pass
        except Exception as failure:
            self._failed_turn(turn_no, 1, True, failure, compaction=True)
            if isinstance(failure, TetherError) and failure.code == "context_overflow":
                return None
            raise
        assert self._accumulated is not None
        read = self._read(self._accumulated, final=True)
        self._completed(turn_no, 1, True, read.turn, read.problem, compaction=True)
        text = read.turn.text.strip()
        return text if read.problem is None and text else None


def _deltas(message: Message) -> list[TextDelta | ThinkingDelta]:
    """The text and thinking of a turn taken in a step, as the deltas the run's events carry (one a part)."""
    deltas: list[TextDelta | ThinkingDelta] = []
    for part in message.parts:
        if isinstance(part, Text) and part.text:
            deltas.append(TextDelta(part.text))
        elif isinstance(part, Thinking) and part.text:
            deltas.append(ThinkingDelta(part.text))
    return deltas


def describe_failure(failure: Exception) -> str:
    return failure.interrupt.detail if isinstance(failure, Interrupted) else f"{type(failure).__name__}: {failure}"


def _has_reasoning_settings(settings: ModelSettings) -> bool:
    return any(key in settings.extra for key in ("thinking", "reasoning", "reasoning_effort", "thinkingConfig"))
