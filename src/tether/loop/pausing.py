"""A run that pauses for decisions, and the run that resumes it (``tether.paused``, docs/approvals.md).

Pausing: the executor defers the calls that wait on a decision (an approval with no approver, an external call)
and runs the turn's others as usual. When the turn's calls are settled and some are deferred, the run stops
``paused``: :func:`paused_state` writes what a later process needs (:class:`~tether.paused.PausedRun`): the
transcript up to the assistant message with the pending calls (left open), the results of the turn's calls that
ran, the guard's counts and what was left of the run's deadline.

Resuming: :func:`checked_decisions` binds each decision to its pending call (id, kind, digest) before anything
runs; a refusal is :class:`~tether.errors.DecisionInvalid` naming the calls. Past ``approval_timeout`` every
pending call is answered as rejected, whatever was decided. :class:`Resumed` is what the run is handed: the
state, the decision of each call, and the settled results are merged with the earlier ones in the model's order
into the turn's one tool message, so the transcript is the one an inline approval would have written.

A state is resumed at most once in a process (:func:`claim`): a second resume of the same pause is refused, so an
approval never runs twice. Across processes, a session (whose stored pause ends when it is resumed) or the durable
engine keeps that promise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from tether.errors import DecisionInvalid
from tether.limits import StopReason
from tether.loop.executor import ToolBatch, ToolExecutor
from tether.loop.guard import LoopGuard, Stop
from tether.loop.outputs import PROCESSED, OutputJudge
from tether.loop.repeats import Verdict
from tether.loop.state import RunState
from tether.messages import Message, ToolCall, ToolResult, cancelled_result
from tether.paused import Approve, Decision, Decisions, ExternalResult, PausedRun, PendingCall, Reject
from tether.tools.base import render_output
from tether.usage import Usage

if TYPE_CHECKING:
    from tether.events import SubAgentEvent, ToolCallStarted, ToolResultReceived
    from tether.loop.interrupts import Interrupter
    from tether.loop.offer import Offer
    from tether.loop.spec import RunSpec

__all__ = [
    "NO_ONE_IN_TIME",
    "PAUSED_KEY",
    "Resumed",
    "Resumption",
    "checked_decisions",
    "claim",
    "marked",
    "merged_results",
    "paused_of",
    "paused_state",
    "rejected_result",
    "resumed_batch",
    "resumed_state",
    "resumption",
    "settled",
    "settled_result",
    "time_left",
    "usage_before",
    "with_pause_marker",
    "without_pause_marker",
]

NO_ONE_IN_TIME = "no one approved this call in time"
"""What the model reads of a pending call still undecided when ``approval_timeout`` passed."""
PAUSED_KEY = "tether_paused"
"""The ``provider_data`` key of the assistant message whose calls a session's paused run waits on: the state
without its messages (the session holds them)."""


class Resumption(msgspec.Struct, frozen=True):
    """What ``Agent.resume`` was given: the state (``None``: the session's) and the decisions, not yet checked
    against the pending calls."""

    state: PausedRun | None
    decisions: Mapping[str, Decision]


class Resumed(msgspec.Struct, frozen=True):
    """A paused run to go on with: its state and, per pending call, the checked decision that settles it."""

    state: PausedRun
    decisions: Mapping[str, Decision]

    def assistant_calls(self) -> tuple[ToolCall, ...]:
        """The calls of the paused turn (the last message of the state's transcript), in the model's order."""
        return self.state.messages[-1].tool_calls


def resumption(state: PausedRun | str | bytes | None, decisions: Decisions, session: str | None) -> Resumption:
    """``Agent.resume``'s arguments read: a state's JSON decoded (``StateInvalid``, ``FormatUnsupported``), the
    decisions' types checked (``DecisionInvalid``), before anything starts."""
    if isinstance(state, str | bytes):
        state = PausedRun.from_json(state)
    elif state is None and session is None:
        raise DecisionInvalid("resume needs the paused run's state, or session= to take the one stored there")
    elif state is not None and not isinstance(state, PausedRun):
        raise DecisionInvalid(f"state must be a PausedRun or its JSON, not {type(state).__name__}")
    if not isinstance(decisions, Mapping):
        raise DecisionInvalid(f"decisions must be a mapping of call id to decision, not {type(decisions).__name__}")
    wrong = sorted(
        str(key) for key, value in decisions.items() if not isinstance(value, Approve | Reject | ExternalResult)
    )
    if wrong:
        raise DecisionInvalid(
            "each decision must be an Approve, a Reject or an ExternalResult: " + ", ".join(wrong),
            details={"calls": wrong},
        )
    return Resumption(state, dict(decisions))


def checked_decisions(state: PausedRun, decisions: Mapping[str, Decision], now: float | None = None) -> Resumed:
    """The decisions bound to the pending calls (see the module docstring); ``DecisionInvalid`` naming every call
    at fault, before anything runs. Past the approval timeout, every call is rejected for want of an answer."""
    if not state.pending:
        raise DecisionInvalid("this state has no pending calls: there is nothing to resume")
    now = time.time() if now is None else now
    if state.approval_timeout is not None and now > state.paused_at + state.approval_timeout:
        return Resumed(state, {call.id: Reject(NO_ONE_IN_TIME) for call in state.pending})
    problems: dict[str, str] = {}
    pending = {call.id: call for call in state.pending}
    for call_id in decisions:
        if call_id not in pending:
            problems[str(call_id)] = "no pending call has this id"
    for call in state.pending:
        decision = decisions.get(call.id)
        if decision is None:
            problems[call.id] = "no decision was given for this call"
        elif (why := _misfit(call, decision)) is not None:
            problems[call.id] = why
    if problems:
        listed = "; ".join(f"{call_id}: {why}" for call_id, why in problems.items())
        raise DecisionInvalid(
            f"the decisions do not fit the paused run's calls ({listed}); nothing was run",
            details={"calls": list(problems), "problems": problems},
        )
    return Resumed(state, {call.id: decisions[call.id] for call in state.pending})


def _misfit(call: PendingCall, decision: Decision) -> str | None:
    """Why ``decision`` cannot settle ``call``, or ``None``."""
    if isinstance(decision, Approve) and call.kind == "external":
        return f"{call.tool!r} is an external call: it takes an ExternalResult (or a Reject), not an Approve"
    if isinstance(decision, ExternalResult) and call.kind == "approval":
        return f"{call.tool!r} needs approval: it takes an Approve (or a Reject), not an ExternalResult"
    digest = getattr(decision, "digest", None)
    if digest is not None and digest != call.digest:
        return "the decision's digest is not the digest of this call's arguments"
    return None


_claimed: set[tuple[str, float, tuple[str, ...]]] = set()
_claims = threading.Lock()


def claim(state: PausedRun) -> None:
    """Mark ``state``'s pause as resumed in this process; ``DecisionInvalid`` if it already was (an approval
    never runs twice)."""
    key = (state.run_id, state.paused_at, state.pending_ids)
    with _claims:
        if key in _claimed:
            raise DecisionInvalid(
                f"the paused run {state.run_id} was already resumed from this pause: its calls were settled",
                details={"calls": list(state.pending_ids)},
            )
        _claimed.add(key)


def rejected_result(call: ToolCall | PendingCall, reason: str) -> ToolResult:
    """A rejected call's result: ``permission_denied``, its content the reason the model reads."""
    call_id, name = (call.id, call.name) if isinstance(call, ToolCall) else (call.id, call.tool)
    text = reason or "the user rejected this call"
    return ToolResult(call_id, name, text, is_error=True, code="permission_denied")


def settled_result(call: PendingCall, decision: Decision) -> ToolResult | None:
    """The result a decision gives a call without running it (``None``: an approval, the tool runs)."""
    if isinstance(decision, Reject):
        return rejected_result(call, decision.reason if decision.reason else "")
    if isinstance(decision, ExternalResult):
        content = decision.content if isinstance(decision.content, str) else render_output(decision.content)
        return ToolResult(
            call.id, call.tool, content, is_error=decision.is_error, code="tool_failed" if decision.is_error else None
        )
    return None


def merged_results(calls: Sequence[ToolCall], *parts: Mapping[str, ToolResult]) -> list[ToolResult]:
    """The results of a turn's calls in the model's order, from the maps ``parts`` (the earlier ones first)."""
    merged: dict[str, ToolResult] = {}
    for part in parts:
        merged.update(part)
    return [merged[call.id] for call in calls if call.id in merged]


def with_pause_marker(message: Message, state: PausedRun) -> Message:
    """``message`` (the assistant message whose calls are pending) carrying ``state`` without its messages, for a
    session to keep."""
    kept = msgspec.to_builtins(msgspec.structs.replace(state, messages=()))
    data = message.provider_data
    return msgspec.structs.replace(message, provider_data={**(data or {}), PAUSED_KEY: kept})


def without_pause_marker(message: Message) -> Message:
    """``message`` without a pause's state (once its calls are settled)."""
    data = message.provider_data
    if not data or PAUSED_KEY not in data:
        return message
    rest = {key: value for key, value in data.items() if key != PAUSED_KEY}
    return msgspec.structs.replace(message, provider_data=rest or None)


def paused_of(messages: Sequence[Message]) -> PausedRun | None:
    """The paused run a session's transcript holds: its last message is an assistant message with the pause's
    marker and calls still open. ``None``: the session is not paused."""
    if not messages or messages[-1].role != "assistant":
        return None
    data = messages[-1].provider_data
    kept: Any = data.get(PAUSED_KEY) if data else None
    if kept is None:
        return None
    state = PausedRun.from_json(msgspec.json.encode(kept))
    return msgspec.structs.replace(state, messages=tuple(without_pause_marker(m) for m in messages))


# --- the run's side: pausing, and going on ----------------------------------------------------------------------


class Pausing(Protocol):
    """What of a run its pause is made of (``engine.Run``)."""

    run_id: str
    session_id: str | None
    spec: RunSpec
    state: RunState
    guard: LoopGuard
    offer: Offer
    interrupter: Interrupter


def paused_state(run: Pausing, batch: ToolBatch) -> tuple[PausedRun, Stop]:
    """The state of ``run``, paused once ``batch`` was settled with calls deferred, and the stop that says so. The
    turn's calls stay open in the transcript (the batch is let go); the results of those that ran are kept."""
    state, guard, limits = run.state, run.guard, run.spec.limits
    state.batch = None
    results = tuple(batch.results[call.id] for call in batch.calls if call.id in batch.results)
    pending = tuple(batch.pending[call.id] for call in batch.calls if call.id in batch.pending)
    left = None
    if limits.run_timeout is not None and run.offer.deadline is not None:
        left = max(run.offer.deadline - run.interrupter.alarm.time(), 0.0)
    paused = PausedRun(
        run_id=run.run_id, messages=tuple(state.transcript), results=results, pending=pending, usage=guard.usage,
        cost=guard.cost, turns=guard.turns, tool_calls=guard.tool_calls, error_turns=guard.error_turns,
        refused=guard.refused, first_new_message=state.first_new, run_timeout_left=left, paused_at=time.time(),
        approval_timeout=limits.approval_timeout, agent=run.spec.agent_name, session_id=run.session_id,
    )  # fmt: skip
    names = ", ".join(f"{call.tool} ({call.kind})" for call in pending)
    detail = f"the run waits for decisions on {len(pending)} tool call(s): {names}"
    return paused, Stop(StopReason.PAUSED, detail)


def resumed_state(spec: RunSpec, resumed: Resumed) -> RunState:
    """The transcript a resumed run goes on with: the paused one, its last message (the calls) open again."""
    paused = resumed.state
    *before, last = paused.messages
    state = RunState(spec.system, before, None)
    state.transcript.append(without_pause_marker(last))
    had_system = 1 if paused.messages[0].role == "system" else 0
    state.first_new = max(paused.first_new_message - had_system + state.body_start, state.body_start)
    state.turn = paused.turns
    return state


def resumed_batch(
    resumed: Resumed,
) -> tuple[tuple[ToolCall, ...], list[Verdict], frozenset[str], dict[str, ToolResult]]:
    """The paused turn's calls as a batch (``RunState.start_batch``): the results of those that ran before the
    pause, the decided results of the rejected and external ones, the approved ones to run."""
    calls = resumed.assistant_calls()
    earlier = {result.call_id: result for result in resumed.state.results}
    pending = {call.id: call for call in resumed.state.pending}
    verdicts: list[Verdict] = []
    for call in calls:
        if call.id in pending:
            verdicts.append(settled_result(pending[call.id], resumed.decisions[call.id]))
        elif call.id not in earlier:  # neither ran nor waited: never run it now
            earlier[call.id] = cancelled_result(call, "the run paused before this call could run")
            verdicts.append(None)
        else:
            verdicts.append(None)
    approved = frozenset(call_id for call_id, decision in resumed.decisions.items() if isinstance(decision, Approve))
    return calls, verdicts, approved, earlier


async def settled(
    executor: ToolExecutor, batch: ToolBatch, turn: int, judge: OutputJudge | None = None
) -> AsyncGenerator[ToolCallStarted | ToolResultReceived | SubAgentEvent, None]:
    """The decided calls of a resumed run's batch settled (the approved ones run now), their events in the model's
    order; the earlier results get none. A typed output the paused turn gave is found again by the run's ``judge``
    (its call validated again), so that the run ends with it once the turn is settled, as it would have."""
    if judge is not None and (given := [c for c in batch.calls if _processed(batch.results.get(c.id))]):
        await judge.verdicts(given, [None] * len(given))
    for group in executor.groups(batch):
        for started in executor.starting(batch, group, turn):
            yield started
        while (relayed := await executor.settle(batch, group)) is not None:
            yield relayed
        for reported in executor.reporting(batch, group, turn):
            yield reported


def _processed(result: ToolResult | None) -> bool:
    """Whether ``result`` is the answer to an output call that gave the run's typed output."""
    return result is not None and not result.is_error and result.content == PROCESSED


def time_left(resumed: Resumed | None, otherwise: float) -> float:
    """The seconds of ``run_timeout`` a run has: what its pause left it, when it is resumed, else ``otherwise``."""
    if resumed is not None and resumed.state.run_timeout_left is not None:
        return resumed.state.run_timeout_left
    return otherwise


def marked(transcript: list[Message], paused: PausedRun | None) -> list[Message]:
    """The transcript a session keeps: a paused run's last message carries the pause (:func:`paused_of`)."""
    if paused is None or not transcript:
        return transcript
    return [*transcript[:-1], with_pause_marker(transcript[-1], paused)]


def usage_before(total: Usage, paused: PausedRun) -> Usage:
    """What a session had used before the run ``paused`` stopped started: its usage less the run's, which the
    resumed run counts again."""
    values = [
        max(a - b, 0)
        for a, b in zip(msgspec.structs.astuple(total), msgspec.structs.astuple(paused.usage), strict=True)
    ]
    return Usage(*values)
