"""The relay: one run of agents that hand off to each other and whose input and answers guardrails check.

An agent with handoffs or guardrails runs through a :class:`Relay` (``agent.py``); any other agent runs the loop
as it is, at no cost. The relay runs the loop (``loop/engine.py``, or ``session_run.py`` in a session) once per
*leg*: the first agent's, then, each time the model takes a transfer tool (``handoffs.py``), the target's, from
the conversation so far (filtered, if the handoff says so), its guard going on from the last leg's counts; and
once more for each retry an output guardrail asks of an answer in text (``guardrails.py``). A turn that reached
one of the run's limits (``LoopGuard.after_turn``) ends the run, its handoff not taken. Its host sees one
run: one ``RunStarted``, the legs' events in order with a ``HandoffTaken`` between two agents' legs, and one
``RunCompleted`` whose result adds the legs up (usage, turn records, the wall time) and names the agent that
answered. One interrupter serves every leg, so the host's ``cancel()`` stops whichever is under way.

Input guardrails (the first agent's, on the prompt) run when the first leg has started and before it asks its
model: one that blocks interrupts the leg before any request, so that it stops as ``guardrail``. One that runs
alongside is a task beside the first call; it interrupts the call if it blocks while the call streams, and the
relay waits for it when the call has completed, before its tool calls may run: a block then closes the leg, its
answer left out of the transcript.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from msgspec import structs

from tether.errors import GuardrailBlocked, InvalidOutput, TetherError
from tether.events import (
    HandoffTaken,
    RunCompleted,
    RunEvent,
    RunResult,
    RunStarted,
    ToolResultReceived,
    TurnCompleted,
)
from tether.limits import StopReason
from tether.loop.context import fallback_text
from tether.loop.engine import Run
from tether.loop.guard import Stop
from tether.loop.interrupts import Interrupt, Interrupted, Interrupter
from tether.loop.pausing import Resumed, Resumption
from tether.loop.progress import RunProgress
from tether.loop.sinks import EventSink, Sinks
from tether.loop.spec import RunSpec
from tether.messages import Message, Prompt
from tether.run_handles import RunStream
from tether.session_run import SessionRun
from tether.team.guardrails import Guardrail, GuardrailResult, guardrails_of
from tether.team.handoffs import Handoff, handoffs_of

if TYPE_CHECKING:
    from tether.loop.steps import StepRunner
    from tether.sessions import SessionStore

__all__ = ["Member", "Relay", "output_check", "team_of"]


@dataclass(frozen=True, slots=True)
class Member:
    """An agent as the relay runs it: its name, the spec of its legs, its handoffs by tool name, its guardrails."""

    name: str | None
    spec: RunSpec
    transfers: dict[str, Handoff]
    input_guardrails: tuple[Guardrail, ...] = ()
    output_guardrails: tuple[Guardrail, ...] = ()

    @classmethod
    def of(
        cls,
        name: str | None,
        spec: RunSpec,
        handoffs: Sequence[Handoff],
        inputs: tuple[Guardrail, ...],
        outputs: tuple[Guardrail, ...],
    ) -> Member:
        """An agent's member: its output guardrails ``spec``'s last output validators."""
        if outputs:
            spec = replace(spec, output_validators=(*spec.output_validators, output_check(outputs)))
        return cls(name, spec, {handoff.name: handoff for handoff in handoffs}, inputs, outputs)


def team_of(
    handoffs: Iterable[Any], inputs: Iterable[Any], outputs: Iterable[Any]
) -> tuple[tuple[Handoff, ...], tuple[Guardrail, ...], tuple[Guardrail, ...]]:
    """``Agent(handoffs=..., input_guardrails=..., output_guardrails=...)``, checked."""
    return handoffs_of(handoffs), guardrails_of(inputs, "input_guardrails"), guardrails_of(outputs, "output_guardrails")


def output_check(guardrails: Sequence[Guardrail]) -> Callable[[Any, Any], Any]:
    """The output validator that runs ``guardrails`` on a typed output once it is valid: a retry is a
    ``ModelRetry`` (the judge's retries, ``loop/outputs.py``), a block a ``GuardrailBlocked`` that stops the run."""
    from tether.output import ModelRetry

    async def output_guardrails(ctx: Any, output: Any) -> Any:
        for guardrail in guardrails:
            verdict = await guardrail(ctx, output)
            if verdict.action == "retry":
                raise ModelRetry(verdict.message)
            if verdict.action == "block":
                raise GuardrailBlocked(verdict.message, guardrail=guardrail.name)
        return output

    return output_guardrails


class Relay:
    """One run of a team of agents (see the module docstring); iterate :meth:`events` once."""

    __slots__ = (
        "_bound", "_deps", "_first", "_forward", "_history", "_interrupter", "_last", "_prompt", "_resume",
        "_session", "_sinks", "_steps", "_store", "result",
    )  # fmt: skip

    def __init__(
        self,
        first: Member,
        prompt: Prompt | None,
        history: Sequence[Message],
        interrupter: Interrupter,
        sinks: Sequence[EventSink],
        *,
        store: SessionStore | None = None,
        session: str | None = None,
        steps: StepRunner | None = None,
        deps: Any = None,
        bound: Callable[[RunSpec], RunSpec] | None = None,
        resume: Resumed | Resumption | None = None,
    ) -> None:
        """``bound`` lowers the spec of each agent handed to (the limits of a run nested in another). ``resume``:
        the paused run the first leg goes on with (``loop/pausing.py``): checked already, or, in a session, the
        decisions its session run checks once it has loaded the pause."""
        self._resume = resume
        self._first, self._prompt, self._history = first, prompt, tuple(history)
        self._interrupter, self._store, self._session, self._steps, self._deps = (
            interrupter, store, session, steps, deps,
        )  # fmt: skip
        self._sinks = Sinks(sinks)
        self._forward = _Forward(self._sinks)
        self._bound = bound
        self._last: Run | None = None
        self.result: RunResult[Any] | None = None

    @property
    def tool_calls(self) -> int:
        """The tool calls the run's legs have made so far (the last leg's guard counts the earlier legs')."""
        return self._last.guard.tool_calls if self._last is not None else 0

    async def events(self) -> AsyncGenerator[RunEvent, None]:
        """The run's events, its legs' one after the other (see the module docstring)."""
        member, prompt, history = self._first, self._prompt, self._history
        legs: list[RunResult[Any]] = []
        blocked: tuple[str, str, str] | None = None
        retries, started, carried, filtered = 0, time.perf_counter(), None, False
        while True:
            leg = self._leg(member, prompt, history, carried, time.perf_counter() - started, first=not legs)
            inner = leg.events()
            gate = _Gate(self, member.input_guardrails if not legs and prompt is not None else ())
            handed: Handoff | None = None
            try:
                async for event in inner:
                    kind = type(event)
                    if kind is RunCompleted:
                        continue
                    if kind is RunStarted:
                        if not legs:
                            yield event
                            await gate.opened(leg.run)
                        continue
                    if kind is ToolResultReceived and not event.result.is_error:  # type: ignore[union-attr]
                        handed = handed or member.transfers.get(event.result.name)  # type: ignore[union-attr]
                    yield event
                    if kind is TurnCompleted and gate.pending and await gate.closed():
                        break  # the first answer is left out: the leg ends as abandoned, its tools never run
            finally:
                await inner.aclose()
                gate.cancel()
            result = leg.result
            assert result is not None, "a leg always has a result once its events are over"
            blocked = blocked or gate.blocked
            legs.append(result)
            carried = self._last = leg.run
            if blocked is not None or self._sinks.error is not None:
                break
            if (after_turn := self._interrupter.after_turn) is not None and result.stop_reason is StopReason.DONE_TOOL:
                legs[-1] = _stopped(result, after_turn)  # the host asked to stop after this turn: no handoff
                break
            if handed is not None and result.stop_reason is StopReason.DONE_TOOL:
                if leg.run is not None and (limit := leg.run.guard.after_turn()) is not None:
                    legs[-1] = _stopped(result, limit)  # a limit reached by this turn: no handoff past it
                    break
                try:
                    target = handed.agent._team_member()
                    if self._bound is not None:
                        target = replace(target, spec=self._bound(target.spec))
                    history = handed.filtered(_body(result.messages))
                except TetherError as error:  # the target cannot be run, or the filter broke the history
                    legs[-1] = _failed(result, error)
                    break
                filtered = filtered or handed.history is not None
                event = HandoffTaken(member.name or "", target.name or "", result.turns)
                self._forward(event)
                yield event
                member, prompt = target, None
                continue
            if not _checks_text(member, result):
                break
            verdict, name = await self._checked(member, leg, result)
            if verdict.action == "retry" and retries < member.spec.limits.output_retries:
                retries += 1
                history, prompt = _body(result.messages), verdict.message
                continue
            if verdict.action == "block":
                blocked = (name, verdict.message, "output")
            elif verdict.action == "retry":
                legs[-1] = _invalid(result, retries + 1, verdict.message)
            break
        self.result = _joined(legs, member, blocked, started, self._sinks, filtered)
        completed = RunCompleted(self.result)
        self._forward.last(completed)
        yield completed

    def _leg(
        self,
        member: Member,
        prompt: Prompt | None,
        history: Sequence[Message],
        carried: Run | None,
        elapsed: float,
        *,
        first: bool,
    ) -> _Leg:
        """The next leg: ``member``'s run of ``prompt`` after ``history`` (in the session, when there is one; its
        history then the stored one, as this relay passed it on), going on from ``carried``, ``elapsed`` seconds
        after the run started."""
        self._forward.first = first
        if not first:
            self._interrupter.reopen()
        spec = member.spec if carried is None else _remaining(member.spec, elapsed)
        sinks = (self._forward,)

        def prepared(run: Run) -> None:
            run.state.speaker = member.name
            if carried is not None:
                run.guard.carry(carried.guard)
                run.run_id = carried.run_id  # one run to its host, its tools and its observers
                if run.progress is not None:
                    run.progress.run_id = carried.run_id

        resume, self._resume = self._resume, None  # the first leg's only
        if self._store is None or self._session is None:
            resumed = resume if isinstance(resume, Resumed) else None
            run = Run(
                spec, prompt, history, self._interrupter, sinks, steps=self._steps, deps=self._deps, resumed=resumed
            )
            prepared(run)
            return _Leg(run, None)

        def prepare(stored: Sequence[Message]) -> tuple[Sequence[Message], Callable[[Run], None]]:
            return (stored if first else history), prepared

        session = SessionRun(
            spec, prompt, self._store, self._session, self._interrupter, sinks, self._steps, self._deps, prepare
        )
        session.resumption = resume if isinstance(resume, Resumption) else None
        return _Leg(None, session)

    async def _checked(self, member: Member, leg: _Leg, result: RunResult[Any]) -> tuple[GuardrailResult, str]:
        """The output guardrails' word on an answer in text: the first that does not pass, or a pass."""
        run = leg.run
        assert run is not None
        context = RunProgress(run.run_id, self._deps, run.state, run.guard).context()
        for guardrail in member.output_guardrails:
            verdict = await guardrail(context, result.text)
            if verdict.action != "pass":
                return verdict, guardrail.name
        return GuardrailResult.passed(), ""


def resumed_relay(
    member: Member,
    resume: Resumed | Resumption,
    sinks: Sequence[EventSink],
    store: SessionStore | None,
    session: str | None,
    deps: Any,
) -> RunStream:
    """A paused run of ``member``'s resumed through its relay (``Agent.resume`` of an agent with guardrails)."""
    interrupter = Interrupter()
    relay = Relay(member, None, (), interrupter, sinks, store=store, session=session, deps=deps, resume=resume)
    return RunStream(relay.events(), relay, interrupter)


class _Leg:
    """One leg's run: the loop's own, or one in the session (whose ``Run`` is made when it starts)."""

    __slots__ = ("_plain", "_session")

    def __init__(self, plain: Run | None, session: SessionRun | None) -> None:
        self._plain, self._session = plain, session

    @property
    def run(self) -> Run | None:
        return self._plain if self._plain is not None else self._session._run if self._session is not None else None

    @property
    def result(self) -> RunResult[Any] | None:
        run = self.run
        return run.result if run is not None else None

    def events(self) -> AsyncGenerator[RunEvent, None]:
        if self._plain is not None:
            return self._plain.events()
        assert self._session is not None
        return self._session.events()


class _Gate:
    """The input guardrails of a relay's first leg (see the module docstring)."""

    __slots__ = ("_guardrails", "_relay", "_task", "blocked")

    def __init__(self, relay: Relay, guardrails: tuple[Guardrail, ...]) -> None:
        self._relay = relay
        self._guardrails = guardrails
        self._task: asyncio.Task[tuple[GuardrailResult, str]] | None = None
        self.blocked: tuple[str, str, str] | None = None
        """The name and message of the guardrail that blocked the input."""

    @property
    def pending(self) -> bool:
        """Guardrails run alongside the first call, and their word has not been taken yet."""
        return self._task is not None

    async def opened(self, run: Run | None) -> None:
        """The leg has started and asked nothing yet: the blocking guardrails run now, those alongside start."""
        if not self._guardrails or run is None:
            return
        interrupter = self._relay._interrupter
        context = RunProgress(run.run_id, self._relay._deps, run.state, run.guard).context()
        prompt = run.state.prompt
        before = tuple(g for g in self._guardrails if not g.run_alongside)
        alongside = tuple(g for g in self._guardrails if g.run_alongside)
        if before:
            try:
                verdict, name = await interrupter.wait(_first_block(before, context, prompt))
            except Interrupted:
                return  # the host cancelled while they ran: the leg takes the interrupt at once
            if self._block(verdict, name):
                return
        if alongside:
            self._task = asyncio.get_running_loop().create_task(_first_block(alongside, context, prompt))
            self._task.add_done_callback(self._decided)

    def _decided(self, task: asyncio.Task[tuple[GuardrailResult, str]]) -> None:
        """The guardrails alongside have their word: a block interrupts the call under way."""
        if not task.cancelled() and task.exception() is None:
            self._block(*task.result())

    async def closed(self) -> bool:
        """The first call has completed: wait for the guardrails alongside; whether they blocked."""
        task, self._task = self._task, None
        assert task is not None
        if self.blocked is None and not task.done():
            try:
                await self._relay._interrupter.wait(_awaited(task))
            except Interrupted:  # the host's cancel, or their block (its callback came first)
                task.cancel()
                return self.blocked is not None
        return self.blocked is not None or self._block(*task.result())

    def _block(self, verdict: GuardrailResult, name: str) -> bool:
        if verdict.action == "pass" or self.blocked is not None:
            return self.blocked is not None
        self.blocked = (name, verdict.message, "input")
        self._relay._interrupter.request(Interrupt(StopReason.GUARDRAIL, _blocked_detail(name, "input")))
        return True

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


class _Forward:
    """The host's sinks as a leg's one sink: a later leg's ``RunStarted`` and every leg's ``RunCompleted`` are
    kept from them (the relay hands on its own)."""

    __slots__ = ("first", "sinks")

    def __init__(self, sinks: Sinks) -> None:
        self.sinks = sinks
        self.first = True

    def __call__(self, event: RunEvent) -> None:
        kind = type(event)
        if kind is RunCompleted or (kind is RunStarted and not self.first) or not self.sinks.sinks:
            return
        self.sinks(event)

    def last(self, event: RunCompleted) -> None:
        if self.sinks.sinks:
            self.sinks(event)


async def _first_block(guardrails: Sequence[Guardrail], context: Any, value: Any) -> tuple[GuardrailResult, str]:
    """The first of ``guardrails`` (in order) that does not let ``value`` pass; an input cannot be retried, so a
    retry blocks."""
    for guardrail in guardrails:
        verdict = await guardrail(context, value)
        if verdict.action != "pass":
            return GuardrailResult.block(verdict.message), guardrail.name
    return GuardrailResult.passed(), ""


async def _awaited(task: asyncio.Task[tuple[GuardrailResult, str]]) -> tuple[GuardrailResult, str]:
    """``task``'s result, awaited without cancelling it when the wait is (an interrupt takes the wait)."""
    return await asyncio.shield(task)


def _blocked_detail(name: str, what: str) -> str:
    return f"the {what} guardrail {name!r} blocked the run"


def _checks_text(member: Member, result: RunResult[Any]) -> bool:
    """An answer in text that ``member``'s output guardrails check (a typed output's run them as validators)."""
    return bool(member.output_guardrails) and member.spec.output is None and result.stop_reason is StopReason.COMPLETE


def _body(messages: Sequence[Message]) -> tuple[Message, ...]:
    """A transcript without its system prompt: the next agent's own takes its place."""
    return tuple(messages[1:] if messages and messages[0].role == "system" else messages)


def _remaining(spec: RunSpec, elapsed: float) -> RunSpec:
    """``spec`` for a leg after the first: the run's deadline is what is left of it after ``elapsed`` seconds."""
    limits = spec.limits
    if limits.run_timeout is None:
        return spec
    return replace(spec, limits=replace(limits, run_timeout=max(limits.run_timeout - elapsed, 0.001)))


def _stopped(result: RunResult[Any], interrupt: Interrupt | Stop) -> RunResult[Any]:
    """``result`` stopped by ``interrupt`` (a cancel after the turn, or a limit the turn reached) where its leg
    would have handed off."""
    text = fallback_text(interrupt.reason, interrupt.detail)
    return structs.replace(result, stop_reason=interrupt.reason, detail=interrupt.detail, text=text, degraded=True)


def _failed(result: RunResult[Any], error: TetherError) -> RunResult[Any]:
    """``result`` stopped as ``error``: the handoff its last turn asked for could not be made."""
    detail = str(error)
    text = fallback_text(StopReason.ERROR, detail)
    return structs.replace(result, stop_reason=StopReason.ERROR, error=error, detail=detail, text=text, degraded=True)


def _invalid(result: RunResult[Any], tries: int, message: str) -> RunResult[Any]:
    """``result`` stopped as ``invalid_output``: an output guardrail still asked for a retry after the last."""
    detail = f"the output was invalid after {tries} tries: {message}"
    error = InvalidOutput(detail, raw=result.text, errors=(message,))
    return structs.replace(
        result, stop_reason=StopReason.INVALID_OUTPUT, detail=detail, error=error, degraded=True, output=None
    )


def _first_new(first: RunResult[Any], last: RunResult[Any], filtered: bool) -> int:
    """Where the run's own messages start in the last leg's transcript: where they did in the first (the system
    prompt there may be another agent's, or none), or, once a handoff's filter rewrote the history, where the last
    leg's did."""
    if filtered:
        return last.first_new_message
    return first.first_new_message - _systems(first.messages) + _systems(last.messages)


def _systems(messages: Sequence[Message]) -> int:
    return 1 if messages and messages[0].role == "system" else 0


def _joined(
    legs: Sequence[RunResult[Any]],
    member: Member,
    blocked: tuple[str, str, str] | None,
    started: float,
    sinks: Sinks,
    filtered: bool,
) -> RunResult[Any]:
    """The run's result: its last leg's, with the legs' usage and records added up, the agent that answered
    named, and a guardrail's block (an input's, or an output's on text or a typed output) as its stop."""
    last, first = legs[-1], legs[0]
    usage = first.usage
    for leg in legs[1:]:
        usage = usage + leg.usage
    result = structs.replace(
        last,
        usage=usage,
        turn_usage=tuple(u for leg in legs for u in leg.turn_usage),
        turn_records=tuple(r for leg in legs for r in leg.turn_records),
        duration_ms=(time.perf_counter() - started) * 1000.0,
        first_new_message=_first_new(first, last, filtered),
        last_agent=member.name,
    )
    if blocked is None and isinstance(last.error, GuardrailBlocked):
        blocked = (last.error.guardrail, last.error.message, "output")
    if blocked is not None:
        name, message, what = blocked
        error = GuardrailBlocked(message, guardrail=name)
        result = structs.replace(
            result, stop_reason=StopReason.GUARDRAIL, text=message, detail=_blocked_detail(name, what),
            error=error, degraded=True, output=None,
        )  # fmt: skip
    elif (stop := sinks.stop()) is not None and last.stop_reason is not StopReason.ERROR:
        result = structs.replace(result, stop_reason=stop.reason, detail=stop.detail, error=stop.error, degraded=True)
    return result
