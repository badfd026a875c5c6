"""A run in a stored session: the session loaded before the run starts, saved after every turn and at its end.

A :class:`SessionRun` is what ``agent.stream(..., session=ID)`` iterates: it loads the session from the agent's
store (a new one when it does not exist yet), runs the loop on its messages, and hands the run a checkpoint that
saves the transcript and the usage added to the session's, so a killed process loses at most the turn in flight.
A store that also keeps tool outputs (``sessions.OutputStore``) keeps the run's long ones. When the agent keeps
its exchanges (``record_exchanges``), the run's provider calls are handed to the store with each save, before
the transcript (``tether.exchanges``; a store that cannot keep them is refused before the run starts).

A session whose run paused for decisions (``loop/pausing.py``) keeps the pause on its last message: a new run in
it makes no model call and answers ``paused`` again with the same pending calls, until ``Agent.resume(...,
session=ID)`` (:attr:`SessionRun.resumption`) settles them and goes on.

In a durable run (``loop/steps.py``) the load and each save are steps of their own: an execution of the run
again sees the session as the first one did, and never saves an older transcript over a newer one.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import msgspec

from tether.errors import DecisionInvalid
from tether.events import RunCompleted, RunEvent, RunResult, RunStarted
from tether.limits import StopReason
from tether.loop.engine import Run
from tether.loop.interrupts import Interrupter
from tether.loop.pausing import Resumed, Resumption, checked_decisions, claim, paused_of, usage_before
from tether.loop.sinks import EventSink
from tether.loop.spec import RunSpec
from tether.messages import Message, Prompt
from tether.providers.attachments import refuse_unreadable
from tether.run_handles import RunStream
from tether.usage import Usage

if TYPE_CHECKING:
    from tether.exchanges import ExchangeLog
    from tether.loop.steps import StepRunner
    from tether.paused import PausedRun
    from tether.sessions import ExchangeStore, Session, SessionStore


class SessionRun:
    """One run continuing a stored session (see the module docstring); iterate :meth:`events` once."""

    __slots__ = (
        "_deps", "_interrupter", "_latest", "_loaded", "_prepare", "_prompt", "_result", "_run", "_saves", "_sinks",
        "_spec", "_steps", "_store", "id", "resumption",
    )  # fmt: skip

    def __init__(
        self,
        spec: RunSpec,
        prompt: Prompt | None,
        store: SessionStore,
        session_id: str,
        interrupter: Interrupter,
        sinks: Sequence[EventSink],
        steps: StepRunner | None = None,
        deps: Any = None,
        prepare: Callable[[Sequence[Message]], tuple[Sequence[Message], Callable[[Run], None]]] | None = None,
    ) -> None:
        """``prepare``: for a run that continues another under a new agent (``tether.team``), the history it
        runs from (the stored one as the handoff filters it; saved so from then on) and what is done to the run
        once it is made."""
        self._spec, self._prompt, self._store, self.id = spec, prompt, store, session_id
        self._prepare = prepare
        self._deps = deps
        self._interrupter, self._sinks, self._steps = interrupter, sinks, steps
        self._run: Run | None = None
        self._latest: Session | None = None
        """The session as last loaded or saved."""
        self._loaded = Usage()
        """What the session had used when it was loaded: the run's usage is added to it."""
        self._saves = 0
        self._result: RunResult | None = None
        """The result of a run that could not start: its session is paused."""
        self.resumption: Resumption | None = None
        """The decisions that resume the session's paused run; ``None``: a new run (``Agent.resume``)."""
        if spec.record_exchanges:
            _check_keeps_exchanges(store)

    @property
    def result(self) -> RunResult | None:
        """The run's result once it has completed."""
        return self._run.result if self._run is not None else self._result

    async def events(self) -> AsyncGenerator[RunEvent, None]:
        """The run's events, the session loaded before the first."""
        from tether.sessions import OutputStore

        stored = await (self._load() if self._steps is None else self._steps.step("session:load", self._load))
        self._latest, self._loaded = stored, stored.usage
        refuse_unreadable(stored.messages, self._spec.provider.info, f"the session {self.id!r}")
        outputs = self._store if isinstance(self._store, OutputStore) else None  # else kept for this run only
        paused = paused_of(stored.messages)
        if paused is not None and self.resumption is None:  # no model call: the pause as it is
            started = RunStarted(paused.run_id, self._spec.provider.info.model_string, "")
            for told in (started, RunCompleted(self._still_paused(paused))):
                for sink in self._sinks:
                    sink(told)
                yield told
            return
        resumed = None if self.resumption is None else self._resumed(paused)
        if resumed is not None:
            self._loaded = usage_before(stored.usage, resumed.state)
        history, prepared = self._prepare(stored.messages) if self._prepare is not None else (stored.messages, None)
        self._run = Run(
            self._spec, self._prompt, history if resumed is None else (), self._interrupter, self._sinks,
            self._checkpoint, session_id=self.id, output_store=outputs, steps=self._steps, deps=self._deps,
            resumed=resumed,
        )  # fmt: skip
        if prepared is not None:
            prepared(self._run)
        if self._spec.record_exchanges:
            self._run.calls.exchanges = self._exchange_log(self._run.run_id)
        events = self._run.events()
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()

    def _still_paused(self, paused: PausedRun) -> RunResult:
        """The result of a run asked of a paused session: no model call, the pause as it is, and what to do."""
        detail = (
            f"the session {self.id!r} is paused, waiting for decisions on its pending tool calls: resume it with "
            f"agent.resume(None, decisions, session={self.id!r}) before running it again"
        )
        self._result = RunResult(
            text="", stop_reason=StopReason.PAUSED, messages=paused.messages, usage=Usage(), detail=detail,
            turns=paused.turns, run_id=paused.run_id, first_new_message=len(paused.messages),
            pending=paused.pending, state=paused, last_agent=self._spec.agent_name,
        )  # fmt: skip
        return self._result

    def _resumed(self, paused: PausedRun | None) -> Resumed:
        """The session's paused run with its decisions checked (``DecisionInvalid`` before anything runs): the
        state given must be the session's own pause."""
        resumption = self.resumption
        assert resumption is not None
        given = resumption.state
        if paused is None:
            raise DecisionInvalid(f"the session {self.id!r} is not paused: there is no run to resume in it")
        if given is not None and (given.run_id, given.pending_ids) != (paused.run_id, paused.pending_ids):
            raise DecisionInvalid(
                f"the state given is not the paused run of the session {self.id!r} (run {paused.run_id})",
                details={"calls": list(given.pending_ids)},
            )
        state = paused if given is None else msgspec.structs.replace(given, messages=paused.messages)
        resumed = checked_decisions(state, resumption.decisions)
        claim(resumed.state)
        return resumed

    def _exchange_log(self, run_id: str) -> ExchangeLog:
        """Where the run keeps its exchanges until they are saved, masked as the run's telemetry is."""
        from tether.exchanges import ExchangeLog
        from tether.redaction import Redaction

        redaction = self._spec.redaction or Redaction(self._spec.masker)
        return ExchangeLog(run_id, self._spec.provider.info.model_string, redaction)

    async def _load(self) -> Session:
        from tether.sessions import Session, SessionNotFound

        try:
            return await self._store.load(self.id)
        except SessionNotFound:
            return Session.new(id=self.id, model=self._spec.provider.info.model_string)

    async def _checkpoint(self, messages: Sequence[Message], usage: Usage) -> None:
        """The run's checkpoint: save the transcript so far, its usage added to what the session had used."""
        if self._steps is None:
            return await self._save(messages, usage)
        self._saves += 1  # a durable run's saves are steps: an execution again does not save an older transcript
        return await self._steps.step(f"session:save:{self._saves}", lambda: self._save(messages, usage))

    async def _save(self, messages: Sequence[Message], usage: Usage) -> None:
        from tether.sessions import suggest_title

        latest = self._latest
        assert latest is not None, "a session is saved by its run, after it was loaded"
        title = latest.title or suggest_title(messages)
        model = self._spec.provider.info.model_string
        updated = latest.updated(messages=messages, usage=self._loaded + usage, model=model, title=title)
        log = self._run.calls.exchanges if self._run is not None else None
        if log is not None and (exchanges := log.take()):
            await cast("ExchangeStore", self._store).save_exchanges(self.id, exchanges)
        await self._store.save(updated)
        self._latest = updated


def resumed_stream(
    spec: RunSpec,
    resume: Resumed | Resumption,
    sinks: Sequence[EventSink],
    store: SessionStore | None,
    session: str | None,
    deps: Any,
) -> RunStream:
    """A paused run resumed (``loop/pausing.py``): checked already (:func:`resumed_now`), or in ``session``,
    whose pause its decisions are checked against once it is loaded."""
    interrupter = Interrupter()
    if isinstance(resume, Resumed):
        run = Run(spec, None, (), interrupter, sinks, deps=deps, resumed=resume)
        return RunStream(run.events(), run, interrupter)
    assert store is not None, "a resume left unchecked is a session's"
    assert session is not None, "a resume left unchecked is a session's"
    stored = SessionRun(spec, None, store, session, interrupter, sinks, None, deps)
    stored.resumption = resume
    return RunStream(stored.events(), stored, interrupter)


def resumed_now(resumption: Resumption, session: str | None) -> Resumed | Resumption:
    """A resume's decisions checked now (``DecisionInvalid`` before anything runs) and its pause claimed, when its
    state is given and it is not in a session; else left for the session's run to check."""
    if session is not None:
        return resumption
    assert resumption.state is not None, "resumption() refuses a resume with neither state nor session"
    resumed = checked_decisions(resumption.state, resumption.decisions)
    claim(resumed.state)
    return resumed


def _check_keeps_exchanges(store: SessionStore) -> None:
    """``ConfigInvalid`` before the run starts when the agent keeps its exchanges and its store cannot."""
    from tether.errors import ConfigInvalid
    from tether.sessions import ExchangeStore

    if not isinstance(store, ExchangeStore):
        kind = type(store).__name__
        raise ConfigInvalid(f"record_exchanges needs a session store that keeps exchanges, and {kind} does not")
