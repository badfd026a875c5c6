"""One provider call, as the loop makes it: streamed under its deadlines, folded into a turn, counted and recorded.

A :class:`ProviderCall` is made per call, one of the run's :class:`Calls`. Iterating :meth:`ProviderCall.deltas`
makes the call: the provider's events are awaited through the run's interrupter (``interrupts.py``: a cancel or
a deadline interrupts the wait, never the host's code), folded by a ``StreamAccumulator``, and the text and thinking
deltas are handed on as they come, a thinking block's between its marks (not in JSON action mode, whose text is an
action, nor for a call whose text is not the run's answer), and so are the provider's retries (``ProviderRetry`` and
``RateLimitWait``, events of its stream: in JSON action mode too, never for a compaction's quiet call). When the
stream is over, however it ended, :attr:`ProviderCall.outcome` holds what the call gave (:class:`CallOutcome`), and
its usage has been counted: in the run's guard (turns, budget), per call (``RunResult.turn_usage``), in its record
and in the token gauge.

A malformed answer (``InvalidResponse``) is not an exception out of the call: it is the outcome's ``problem``
(the loop corrects and retries it). Every other failure (a provider error, an interrupt) is raised, with known
keys masked, after the outcome is kept. :meth:`Calls.completed` and :meth:`Calls.failed` make the
``TurnCompleted`` every started call gets, and keep its record; :meth:`Calls.failure` and
:meth:`Calls.rejected` the ``CallFailed`` of a call that gave no usable answer, once the loop has decided what
follows; :meth:`Calls.read` decides whether an answer is usable.

In a durable run the call is a step (``steps.py``): it runs to its end inside the step, its deltas (and its
retries) reaching the sinks as they come, and the turn is the step's result; the run's stream is handed the
turn's text and thinking after the step, its retries only through the sinks.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from tether.errors import InvalidResponse, TetherError
from tether.events import (
    THINKING_ENDED,
    THINKING_STARTED,
    CallFailed,
    CallNext,
    FallbackTaken,
    LlmEvent,
    PartialOutput,
    ProviderRetry,
    RateLimitWait,
    RunEvent,
    TextDelta,
    ThinkingDelta,
    TurnCompleted,
    TurnStatus,
)
from tether.exchanges import ExchangeLog, ExchangeRecorder
from tether.loop.accumulator import AccumulatedTurn, Shown, StreamAccumulator, rejection, without_calls
from tether.loop.actions import ActionProtocol, Interpreted
from tether.loop.guard import LoopGuard
from tether.loop.interrupts import Interrupted, Interrupter, Picker, deadline_passed
from tether.loop.outputs import PartialOutputs
from tether.loop.records import CallRecorder, close_stream, within
from tether.loop.steps import RetryLater
from tether.messages import Message, Text, Thinking
from tether.providers.base import ModelInfo, Request
from tether.providers.fallback import FallbackProvider, Refused
from tether.secrets import mask_exception_in_place
from tether.usage import NO_USAGE, Usage

if TYPE_CHECKING:
    from types import TracebackType

    from tether.errors import ProviderError
    from tether.loop.context.tokens import TokenGauge
    from tether.loop.spec import RunSpec
    from tether.loop.steps import StepRunner
    from tether.telemetry.observer import RunObserver

ONE_REQUEST = Usage(requests=1)
"""What a call adds to its own usage: the request itself (one shared instance)."""
NOTHING = AccumulatedTurn(Message("assistant", ()), (), (), "error", NO_USAGE, ended=False)
"""The turn of a call that could not even be assembled."""

Notify = Callable[[RunEvent], None]
Delta = Shown | PartialOutput
"""What a call hands on as it streams (:meth:`ProviderCall.deltas`)."""


class CallOutcome(msgspec.Struct, frozen=True):
    """What one provider call gave."""

    turn: AccumulatedTurn
    """The answer as far as it came (complete, cut short, or empty when nothing came)."""
    usage: Usage
    """The call's usage, its request included when the provider was asked."""
    problem: str | None = None
    """Why the answer cannot be used when the provider sent a malformed one."""
    error: InvalidResponse | None = None
    """That malformed answer's error."""


class Calls:
    """Makes the provider calls of one run and keeps what they count (see the module docstring)."""

    __slots__ = (
        "exchanges", "falls_back", "gauge", "guard", "interrupter", "last_text", "notify", "observer", "recorder",
        "spec", "steps", "turn_usage",
    )  # fmt: skip

    def __init__(
        self,
        spec: RunSpec,
        interrupter: Interrupter,
        guard: LoopGuard,
        observer: RunObserver | None,
        notify: Notify,
        steps: StepRunner | None,
    ) -> None:
        self.spec = spec
        self.interrupter = interrupter
        self.guard = guard
        self.observer = observer
        self.notify = notify
        """Hands an event to the run's sinks: a call's deltas reach them as they come."""
        self.steps = steps
        self.recorder = CallRecorder()
        self.turn_usage: list[Usage] = []
        """Each call's usage, in order."""
        self.gauge: TokenGauge | None = None
        """The run's token gauge, which each call's reported input calibrates (set by the compactor)."""
        self.last_text = ""
        """The last text a call gave, however it ended: the answer of a run stopped before it answered."""
        self.exchanges: ExchangeLog | None = None
        """Where each call's exchange is kept, when the run keeps them (``tether.exchanges``; set by its session)."""
        self.falls_back = isinstance(spec.provider, FallbackProvider)
        """The model is a fallback: each call is told when it moves on (a single model pays nothing for it)."""

    def retried(self, error: ProviderError, attempt: int, wait: float) -> None:
        """The provider retries the current call (``Request.on_retry``): counted, observed, and the error's text
        masked (a provider may quote the key in its error body) before its ``ProviderRetry`` is made of it."""
        self.recorder.retries += 1
        self.recorder.waited += wait
        mask_exception_in_place(error, self.spec.masker)
        if self.observer is not None:
            self.observer.retry(error, attempt, wait)

    def waited(self, delay: float, reason: str) -> None:
        """The provider's client-side rate limit holds the current call ``delay`` seconds (``Request.on_wait``):
        observed (a span event)."""
        if self.observer is not None:
            self.observer.rate_wait(delay, reason)

    def counted(self, call: ProviderCall, turn: AccumulatedTurn, requested: bool, first: float) -> Usage:
        """What the call used, counted everywhere it counts; its text kept as the last written."""
        if turn.message.parts and (text := turn.text):
            self.last_text = text
        usage = turn.usage
        if requested:
            if not turn.cached:  # a response cache's replay is no request
                usage = usage + ONE_REQUEST
            self.turn_usage.append(usage)
            self.guard.record_call(usage)
            if self.gauge is not None and call.view is not None:
                self.gauge.observe(call.view, turn.usage)
        self.recorder.end_call(first, usage)
        return usage

    def read(
        self, outcome: CallOutcome, *, final: bool, actions: ActionProtocol | None, continuing: bool = False
    ) -> Interpreted:
        """The answer as the loop can use it, or why it cannot be used.

        ``final`` (tools were off: the summary call, the answer asked for after a repeated call, or any turn of
        a run whose tool choice is ``"none"``): only an answer counts, so tool calls a provider sent anyway are
        dropped, and in JSON action mode any text is the answer (a ``final`` action is unwrapped; ``continuing``:
        more of an answer cut at the output limit, whose text is kept exactly, ``continuation.py``).
        """
        turn = outcome.turn
        if outcome.problem is not None:
            return Interpreted(turn, problem=outcome.problem)
        final = final or self.spec.tool_choice == "none"
        if final:
            turn = without_calls(turn)
        if (problem := rejection(turn)) is not None:
            return Interpreted(turn, problem=problem)
        if actions is not None:
            return actions.interpret(turn, final=final, continuing=continuing)
        return Interpreted(turn)

    def completed(
        self,
        call: ProviderCall,
        turn: AccumulatedTurn,
        rejected: str | None,
        failure: BaseException | None = None,
        *,
        compaction: bool = False,
    ) -> TurnCompleted:
        """The ``TurnCompleted`` of ``call``, with its record kept and observed (a compaction's call is recorded
        and observed too; its ``TurnCompleted`` is not emitted)."""
        recorder = self.recorder
        recorder.record(call.turn, call.attempt, call.final, turn, rejected, failure, compaction=compaction)
        if self.observer is not None:
            self.observer.call_ended(recorder.last(), turn.message, failure)
        status: TurnStatus = "failed" if failure is not None else "rejected" if rejected is not None else "completed"
        return TurnCompleted(call.turn, turn.message, turn.usage, turn.finish_reason, rejected, status, turn.cached)

    def rejected(self, call: ProviderCall, problem: str, decided: object) -> CallFailed:
        """The ``CallFailed`` of ``call``, whose answer could not be used (``problem`` says why): retried when the
        loop ``decided`` on a correction (a ``Message``), else the run stops."""
        then: CallNext = "retry" if isinstance(decided, Message) else "stop"
        return CallFailed(call.turn, call.attempt, "invalid_response", self.spec.masker.mask(problem), then)

    def failure(self, call: ProviderCall, failure: Exception, then: CallNext) -> CallFailed | None:
        """The ``CallFailed`` of ``call``, which raised ``failure``; ``None`` for a call that was cancelled, which
        did not fail."""
        if isinstance(failure, Interrupted):
            if failure.interrupt.error is None:
                return None
            failure = failure.interrupt.error
        if isinstance(failure, TetherError):
            code, message = failure.code, str(failure)
        else:
            code, message = None, f"{type(failure).__name__}: {failure}"
        return CallFailed(call.turn, call.attempt, code, self.spec.masker.mask(message), then)

    def failed(self, call: ProviderCall, failure: Exception, *, compaction: bool = False) -> TurnCompleted:
        """The ``TurnCompleted`` of a call that failed or was interrupted: every call that starts ends."""
        turn = call.outcome.turn if call.outcome is not None else NOTHING
        why = failure.interrupt.detail if isinstance(failure, Interrupted) else f"{type(failure).__name__}: {failure}"
        return self.completed(call, turn, why, failure, compaction=compaction)


class ProviderCall:
    """One provider call (see the module docstring): iterate :meth:`deltas`, then read :attr:`outcome`."""

    __slots__ = (
        "_accumulator", "_calls", "_current", "_exchange", "attempt", "final", "outcome", "quiet", "request", "turn",
        "view",
    )  # fmt: skip

    def __init__(
        self,
        calls: Calls,
        request: Request,
        turn: int,
        attempt: int,
        *,
        final: bool,
        view: tuple[Message, ...] | None = None,
        quiet: bool = False,
    ) -> None:
        """The call for ``request``, one of ``calls``; nothing is sent before its deltas are asked for. ``view``:
        the history it sends, when it is exactly the model's view (the gauge anchors on it). ``quiet``: its deltas
        are not handed on (a compaction's summary)."""
        calls.recorder.begin_call()
        self._calls = calls
        self._exchange = None if calls.exchanges is None else ExchangeRecorder()
        self.request = request if self._exchange is None else msgspec.structs.replace(request, record=self._exchange)
        if calls.falls_back:
            self.request = msgspec.structs.replace(self.request, on_fallback=self._fell_back)
        self.turn = turn
        self.attempt = attempt
        self.final = final
        """Tools were off: only an answer is accepted."""
        self.view = view
        self.quiet = quiet
        self.outcome: CallOutcome | None = None
        """What the call gave, once its stream is over (also when it failed)."""
        self._accumulator = StreamAccumulator()
        self._current: _Current | None = None
        """The call's context, when the run's model is a fallback and is observed."""

    async def deltas(self, actions: ActionProtocol | None) -> AsyncGenerator[Delta, None]:
        """Make the call: its text and thinking as they stream, with the marks of its thinking blocks (none in
        JSON action mode, whose text is an action, or for a quiet call) and the provider's retries (none for a
        quiet call); :attr:`outcome` is set when it is over, however it ended."""
        calls = self._calls
        spec, interrupter, observer = calls.spec, calls.interrupter, calls.observer
        context: AbstractContextManager[Any] | None = None
        if observer is not None:
            observer.call_started(self.turn, self.attempt, self.final, self.request)
            if calls.falls_back:
                context = self._current = _Current(observer)
            else:
                context = observer.call_context()
        alarm, seconds = interrupter.alarm, spec.limits.step_timeout
        if seconds is not None:  # keyed by the interrupter: a run makes one provider call at a time
            alarm.set(interrupter, alarm.time() + seconds, self._timed_out)
        passthrough = actions is None and not self.quiet
        stepped: AccumulatedTurn | None = None
        problem: str | None = None
        error: InvalidResponse | None = None
        stream: AsyncIterator[LlmEvent] | None = None
        requested = interrupter.pending is None  # with an interrupt pending, nothing is sent
        try:
            if calls.steps is not None:
                stepped, live = await self._as_step(context, passthrough)
                for delta in _deltas(stepped.message) if passthrough else ():
                    if not live:  # replayed: its deltas reach the sinks now
                        calls.notify(delta)
                    yield delta
                return
            stream = _stream(spec, self.request)
            if context is not None:
                stream = within(stream, context)
            watched = interrupter.watch(stream, self._picker(passthrough))
            while (shown := await watched.next()) is not None:
                calls.notify(shown)
                yield shown
        except InvalidResponse as malformed:
            mask_exception_in_place(malformed, spec.masker)
            problem, error = f"the provider sent a malformed answer ({malformed.message})", malformed
        except TetherError as failure:  # a provider may quote the key back in its error
            mask_exception_in_place(failure, spec.masker)
            raise
        finally:
            if seconds is not None:
                alarm.clear(interrupter)
            if stream is not None:
                await close_stream(stream)
            turn = self._accumulator.finish() if stepped is None else stepped
            usage = calls.counted(self, turn, requested, self._accumulator.first_event)
            self.outcome = CallOutcome(turn, usage, problem, error)
            if self._exchange is not None and calls.exchanges is not None:
                calls.exchanges.ended(self._exchange, self.turn, self.attempt)

    def _fell_back(self, error: ProviderError, failed: ModelInfo, to: ModelInfo) -> None:
        """The fallback moved on from ``failed`` before its answer began (``Request.on_fallback``): that attempt is
        a record and a span of its own (its request counted, its error's code kept), and the next one, asked of
        ``to`` for the same turn and attempt, starts its own clock and span."""
        calls = self._calls
        mask_exception_in_place(error, calls.spec.masker)
        spent = error.usage if isinstance(error, Refused) else NO_USAGE  # a refused answer's tokens were spent
        usage = spent + ONE_REQUEST
        calls.turn_usage.append(usage)
        calls.guard.record_call(usage)
        calls.recorder.end_call(0.0, usage)
        calls.completed(self, msgspec.structs.replace(NOTHING, model=failed.name, usage=spent), None, error)
        calls.recorder.begin_call()
        if calls.observer is not None:
            calls.observer.fell_back(error, failed, to)
            calls.observer.call_started(self.turn, self.attempt, self.final, self.request)
            if self._current is not None:
                self._current.switch()

    def _picker(self, passthrough: bool) -> Picker[LlmEvent, Delta]:
        """What the watch hands on of each event: its text and thinking (the accumulator itself), only the
        provider's retries (a call whose text is not shown as it comes) or nothing (a quiet call), or, in a run
        with a typed output, the output as written so far."""
        accumulator, spec = self._accumulator, self._calls.spec
        if not passthrough:
            return _Quiet(accumulator, retries=not self.quiet)
        if spec.output is None:
            return accumulator
        return PartialOutputs(accumulator, spec.output, tool_mode=spec.output_mode == "tool", turn=self.turn)

    def _timed_out(self) -> None:
        """The step deadline passed (the alarm's callback: a bound method of the call, so that the run keeps no
        reference to itself for it)."""
        limits = self._calls.spec.limits
        self._calls.interrupter.request(deadline_passed("step_timeout", limits.step_timeout))

    async def _as_step(self, context: Any, passthrough: bool) -> tuple[AccumulatedTurn, bool]:
        """The call as a durable step, named by its turn and attempt, and whether it ran here (its deltas then
        reached the sinks as they came) or was replayed."""
        calls = self._calls
        steps, interrupter = calls.steps, calls.interrupter
        assert steps is not None
        name = step = f"{'compaction' if self.quiet else 'model'}:{self.turn}.{self.attempt}"
        live: list[bool] = []
        sleep = getattr(steps, "sleep", None)
        request, retried = self.request, 0
        while True:  # with a durable sleep, each attempt a step and each retry's wait a sleep (``steps.py``)
            if sleep is not None:
                request = msgspec.structs.replace(self.request, on_retry=_StepRetry(calls, retried))
            try:
                turn = await interrupter.wait(
                    steps.step(step, partial(self._stepped, context, passthrough, live, request))
                )
                if live and getattr(steps, "resumed", None) == step:  # made again after a crash (``steps.py``)
                    calls.recorder.interrupted(self.turn, self.attempt, self.final)
                    calls.turn_usage.append(NO_USAGE)
                return turn, bool(live)
            except RetryLater as later:
                if not self.quiet:
                    calls.notify(ProviderRetry(later.retried + 1, later.wait, later.code, later.message, later.status))
                assert sleep is not None
                await interrupter.wait(sleep(later.wait))
                retried = later.retried
                step = f"{name}~{retried}"

    async def _stepped(self, context: Any, passthrough: bool, live: list[bool], request: Request) -> AccumulatedTurn:
        """The call run to its end inside a step; a malformed stream is raised (``InvalidResponse``) and kept by
        the runner like the turn, and so is a retry to wait for (``RetryLater``)."""
        live.append(True)
        calls = self._calls
        accumulator = StreamAccumulator()
        stream = _stream(calls.spec, request)
        if context is not None:
            stream = within(stream, context)
        try:
            async for event in stream:
                shown = accumulator.add(event)
                if shown is not None and passthrough:
                    calls.notify(shown)
                    while accumulator.held is not None:
                        calls.notify(accumulator.release())
        finally:
            await close_stream(stream)
        return accumulator.finish()


class _StepRetry:
    """A durable run's ``Request.on_retry`` (``steps.py``): the retry counted and observed as a plain run's, then
    the step ended with :class:`RetryLater`; ``retried`` (the retries made in the call's earlier steps) is where
    the provider's ladder counts on from."""

    __slots__ = ("_calls", "retried")

    def __init__(self, calls: Calls, retried: int) -> None:
        self._calls = calls
        self.retried = retried

    def __call__(self, error: ProviderError, attempt: int, wait: float) -> None:
        self._calls.retried(error, attempt, wait)
        raise RetryLater(wait, attempt, error.code, error.message, error.status)


class _Current:
    """The observer's call context as it is now: a fallback's next attempt is a span of its own, begun in the middle
    of a step of the call's stream and entered there (:meth:`switch`), on top of the failed attempt's. Only a
    fallback's calls pay for it."""

    __slots__ = ("_entered", "_observer")

    def __init__(self, observer: RunObserver) -> None:
        self._observer = observer
        self._entered: list[AbstractContextManager[Any]] = []

    def __enter__(self) -> None:
        self.switch()

    def switch(self) -> None:
        """Enter the observer's current call context, until the step ends."""
        if (context := self._observer.call_context()) is not None:
            context.__enter__()
            self._entered.append(context)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        while self._entered:
            self._entered.pop().__exit__(kind, error, trace)


class _Quiet:
    """A watch's picker that folds every event and hands on only the provider's retries, or nothing (``retries``
    false): a call whose text is not shown as it comes (JSON action mode; a compaction's summary, quiet)."""

    __slots__ = ("_accumulator", "_retries")

    held = None
    """Nothing is ever held: the marks of thinking are not handed on."""

    def __init__(self, accumulator: StreamAccumulator, *, retries: bool) -> None:
        self._accumulator = accumulator
        self._retries = retries

    def pick(self, event: LlmEvent) -> ProviderRetry | RateLimitWait | FallbackTaken | None:
        shown = self._accumulator.add(event)
        if type(shown) is ProviderRetry or type(shown) is RateLimitWait or type(shown) is FallbackTaken:
            return shown if self._retries else None
        return None

    def release(self) -> Delta:
        raise AssertionError("a quiet picker holds nothing")


def _deltas(message: Message) -> Sequence[Delta]:
    """The text and thinking of a turn taken in a step, as the events a run carries of them as they stream (one
    delta a part; a thinking part between its marks)."""
    deltas: list[Delta] = []
    for part in message.parts:
        if type(part) is Text and part.text:
            deltas.append(TextDelta(part.text))
        elif type(part) is Thinking:
            deltas.append(THINKING_STARTED)
            if part.text:
                deltas.append(ThinkingDelta(part.text))
            deltas.append(THINKING_ENDED)
    return deltas


def _stream(spec: RunSpec, request: Request) -> AsyncIterator[LlmEvent]:
    """The provider's answer to ``request``: through the run's response cache when it has one
    (``providers/response_cache.py``), which replays an identical request's answer instead of calling."""
    if spec.response_cache is None:
        return spec.provider.stream(request)
    return spec.response_cache.stream(spec.provider, request)
