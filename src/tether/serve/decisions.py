"""A paused run's decisions over HTTP: the body of ``POST /api/runs/{run_id}/decisions`` read, the paused state
found (kept in the run's session, so a restarted server still has it), the decisions checked before anything
runs.

The body is ``tether.paused``'s decisions as JSON, keyed by call id: ``{"decision": "approve", "digest"?}``,
``{"decision": "reject", "reason"}``, ``{"decision": "external_result", "content", "is_error"?}``. A body that is
not that is ``request_invalid``; decisions that do not fit the pending calls are ``decision_invalid`` (its
details name the calls), and nothing runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from tether.errors import DecisionInvalid
from tether.loop.pausing import checked_decisions, paused_of
from tether.messages import Message, ToolResult
from tether.paused import Approve, Decision, ExternalResult, PausedRun, PendingCall, Reject
from tether.serve.security import ApiError

__all__ = [
    "DecisionRefused", "answered", "checked", "may_pause", "paused_in", "read_decisions", "resumed_by",
]  # fmt: skip

_DECISIONS = msgspec.json.Decoder(dict[str, Decision])


class DecisionRefused(ApiError):
    """Decisions that do not fit the paused run's calls: 400 ``decision_invalid`` with the calls at fault."""

    def __init__(self, error: DecisionInvalid) -> None:
        super().__init__(400, error.code, error.message)
        self.details = dict(error.details or {})


def read_decisions(body: bytes) -> dict[str, Decision]:
    """The decisions of a request's body; ``ApiError`` 400 ``request_invalid`` for what is not decisions JSON."""
    try:
        decisions = _DECISIONS.decode(body)
    except msgspec.DecodeError as error:
        raise ApiError(400, "request_invalid", f"the decisions are not valid: {error}") from None
    if not decisions:
        raise ApiError(400, "request_invalid", "the decisions are empty: give one per pending call, by call id")
    return decisions


def paused_in(messages: Sequence[Message], run_id: str) -> PausedRun:
    """The paused state of ``run_id`` a session's transcript holds; ``ApiError`` 409 ``run_not_paused`` when the
    session is not paused on that run (it ended, was resumed already, or another run came after it)."""
    state = paused_of(messages)
    if state is None or state.run_id != run_id:
        raise ApiError(409, "run_not_paused", f"run {run_id!r} is not paused: there is nothing to decide")
    return state


def checked(state: PausedRun, decisions: Mapping[str, Decision]) -> None:
    """``decisions`` bound to ``state``'s pending calls (ids, kinds, digests, none missing); ``DecisionRefused``
    otherwise, before anything runs."""
    try:
        checked_decisions(state, decisions)
    except DecisionInvalid as error:
        raise DecisionRefused(error) from None


def may_pause(agent: Any) -> bool:
    """Whether a run of ``agent`` may pause for a decision: it has an external tool, or an approval tool or a
    permission hook that no inline ``approve`` answers."""
    tools = tuple(agent.tools)
    if any(getattr(t, "external", False) for t in tools):
        return True
    if getattr(agent, "approve", None) is not None:
        return False
    spec = getattr(agent, "_spec", None)
    hook = getattr(getattr(spec, "permissions", None), "can_use_tool", None)
    return hook is not None or any(getattr(t, "approval", False) for t in tools)


# --- the protocols: a client's answer to a pause, in its own terms ------------------------------------------------


def answered(history: Sequence[Message], state: PausedRun) -> dict[str, Decision] | None:
    """The decisions a protocol's client gave as tool results: its conversation ends with tool messages
    answering ``state``'s pending calls (AG-UI tool messages; the AI SDK's ``addToolResult`` outputs). An
    external call's result is its answer; an approval call's is ``{"approved": true}`` or ``{"approved": false,
    "reason": "..."}``. ``None``: the conversation does not answer the pause (a new prompt)."""
    if not history or history[-1].role != "tool":
        return None
    pending = {call.id: call for call in state.pending}
    results = [p for p in history[-1].parts if isinstance(p, ToolResult) and p.call_id in pending]
    if not results:
        return None
    return {r.call_id: _from_result(pending[r.call_id], r.content, r.is_error) for r in results}


def resumed_by(entries: Sequence[Mapping[str, Any]], state: PausedRun) -> dict[str, Decision] | None:
    """The decisions of AG-UI ``resume`` entries (``interruptId`` = the call id, ``status``, ``payload``): a
    ``cancelled`` entry rejects its call; a ``resolved`` one's payload answers it as :func:`answered` reads a
    tool result. ``None`` without entries."""
    if not entries:
        return None
    pending = {call.id: call for call in state.pending}
    decisions: dict[str, Decision] = {}
    for entry in entries:
        call_id = str(entry.get("interruptId") or entry.get("interrupt_id") or "")
        call = pending.get(call_id)
        payload = entry.get("payload")
        if entry.get("status") == "cancelled":
            reason = payload.get("reason", "") if isinstance(payload, dict) else ""
            decisions[call_id] = Reject(str(reason or "the user cancelled this call"))
        elif call is None:
            decisions[call_id] = Approve()  # unknown id: named by checked()
        else:
            decisions[call_id] = _from_value(call, payload, is_error=False)
    return decisions


def _from_result(call: PendingCall, content: str, is_error: bool) -> Decision:
    try:
        value: Any = msgspec.json.decode(content)
    except msgspec.DecodeError:
        value = content
    return _from_value(call, value, is_error=is_error)


def _from_value(call: PendingCall, value: Any, *, is_error: bool) -> Decision:
    if call.kind == "external":
        return ExternalResult(value, is_error=is_error)
    if value is True or (isinstance(value, dict) and value.get("approved") is True):
        return Approve()
    if value is False or (isinstance(value, dict) and value.get("approved") is False):
        reason = value.get("reason", "") if isinstance(value, dict) else ""
        return Reject(str(reason or ""))
    raise DecisionRefused(
        DecisionInvalid(
            f'the answer to the approval call {call.id} must be {{"approved": true}} or {{"approved": false, '
            '"reason": "..."}',
            details={"calls": [call.id], "problems": {call.id: "not an approval"}},
        )
    )
