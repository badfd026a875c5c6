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
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from tether.errors import DecisionInvalid
from tether.messages import Message, ToolCall, ToolResult
from tether.paused import Approve, Decision, Decisions, ExternalResult, PausedRun, PendingCall, Reject
from tether.tools.base import render_output

__all__ = [
    "NO_ONE_IN_TIME",
    "PAUSED_KEY",
    "Resumed",
    "Resumption",
    "checked_decisions",
    "claim",
    "merged_results",
    "paused_of",
    "rejected_result",
    "resumption",
    "settled_result",
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
    """``Agent.resume``'s arguments read: a state's JSON decoded, the decisions' types checked; ``ConfigInvalid``
    style errors before anything starts."""
    if isinstance(state, str | bytes):
        state = PausedRun.from_json(state)
    elif state is None and session is None:
        raise DecisionInvalid("resume needs the paused run's state, or session= to take the one stored there")
    elif state is not None and not isinstance(state, PausedRun):
        raise DecisionInvalid(f"state must be a PausedRun or its JSON, not {type(state).__name__}")
    if not isinstance(decisions, Mapping):
        raise DecisionInvalid(f"decisions must be a mapping of call id to decision, not {type(decisions).__name__}")
    wrong = sorted(str(key) for key, value in decisions.items() if not isinstance(value, Approve | Reject | ExternalResult))
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
        return ToolResult(call.id, call.tool, content, is_error=decision.is_error, code="tool_failed" if decision.is_error else None)
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
