"""A paused run: the calls it waits on, the decisions that settle them, and its state as JSON.

A tool call may need a person's approval (``@tool(approval=True)``, or a permission hook's ``Ask`` with no
``approve=`` callback) or be *external* (``@tool(external=True)``: its result comes from outside the process).
Rather than block, the run stops with ``StopReason.PAUSED``; ``result.pending`` lists the :class:`PendingCall`
values and ``result.state`` is a :class:`PausedRun`, which :meth:`PausedRun.to_json` writes and
:meth:`PausedRun.from_json` reads back in any process. ``Agent.resume(state, decisions)`` goes on from there.

A decision is bound to its call: keyed by the call's id, of the kind the call needs (:class:`Approve` or
:class:`Reject` for an approval, :class:`ExternalResult` or :class:`Reject` for an external call), and, when it
carries a ``digest``, to the call's arguments, so that an approval can never run another call. The digest is the
SHA-256 of the arguments' canonical JSON (:func:`arguments_digest`).

The stored state carries its format's ``version``: an older one is read, a newer one is refused by name
(``format_unsupported``); a text that is not a paused run's state is ``state_invalid``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeAlias

import msgspec

from tether.errors import FormatUnsupported, StateInvalid
from tether.messages import JsonObject, Message, ToolResult
from tether.usage import Cost, Usage

__all__ = [
    "STATE_VERSION",
    "Approve",
    "Decision",
    "Decisions",
    "ExternalResult",
    "PausedRun",
    "PendingCall",
    "Reject",
    "arguments_digest",
]

STATE_VERSION = 1
"""The format version :meth:`PausedRun.to_json` writes; every version up to it is read."""

PendingKind: TypeAlias = Literal["approval", "external"]


def arguments_digest(arguments: JsonObject) -> str:
    """The SHA-256 (hex) of ``arguments``' canonical JSON (keys sorted): what binds a decision to a call."""
    return hashlib.sha256(msgspec.json.encode(arguments, order="sorted")).hexdigest()


class PendingCall(msgspec.Struct, frozen=True):
    """A tool call a paused run waits on: its ``id``, ``tool`` and ``arguments`` as the model gave them,
    ``reason`` (why it needs approval; for an external call, the tool's description), ``kind`` and the
    ``digest`` of its arguments (:func:`arguments_digest`)."""

    id: str
    tool: str
    arguments: JsonObject
    reason: str
    kind: PendingKind
    digest: str

    @classmethod
    def of(cls, call_id: str, tool: str, arguments: JsonObject, reason: str, kind: PendingKind) -> PendingCall:
        """A pending call, its digest computed from ``arguments``."""
        return cls(call_id, tool, arguments, reason, kind, arguments_digest(arguments))


class Approve(msgspec.Struct, frozen=True, tag_field="decision", tag="approve"):
    """Run the call now. With ``digest``, only if it is the pending call's (the arguments the person saw)."""

    digest: str | None = None


class Reject(msgspec.Struct, frozen=True, tag_field="decision", tag="reject"):
    """Do not run the call: the model gets a ``permission_denied`` error result whose content is ``reason``.
    (Named ``Reject``: ``Deny`` is the permission hook's answer.) Settles an approval or an external call."""

    reason: str = ""


class ExternalResult(msgspec.Struct, frozen=True, tag_field="decision", tag="external_result"):
    """The result of an external call, from outside: ``content`` (text, or any JSON value, rendered as a tool's
    return value is), ``is_error`` for a failure the model should read as one. With ``digest``, only for the call
    of those arguments."""

    content: Any
    is_error: bool = False
    digest: str | None = None


Decision: TypeAlias = Approve | Reject | ExternalResult
Decisions: TypeAlias = Mapping[str, Decision]
"""The decisions that resume a paused run, keyed by call id: one for every pending call."""


class PausedRun(msgspec.Struct, frozen=True, kw_only=True):
    """A paused run's state: everything a later process needs to go on with it (see the module docstring).

    ``messages`` is the transcript, ending with the assistant message whose calls are pending; the results of
    that turn's calls that did run are in ``results`` (they join the turn's one tool message, in the model's
    order, when the run resumes). The guard's counts (``turns``, ``tool_calls``, ``error_turns``, ``cost``)
    continue; ``run_timeout_left`` is what was left of ``Limits.run_timeout``."""

    version: int = STATE_VERSION
    run_id: str
    messages: tuple[Message, ...]
    results: tuple[ToolResult, ...] = ()
    pending: tuple[PendingCall, ...]
    usage: Usage = msgspec.field(default_factory=Usage)
    cost: Cost | None = None
    turns: int = 0
    tool_calls: int = 0
    error_turns: int = 0
    refused: str | None = None
    """Why the run stops with ``max_tool_calls`` once the paused turn is settled, if a call of it was refused."""
    first_new_message: int = 0
    run_timeout_left: float | None = None
    paused_at: float
    """Unix time of the pause."""
    approval_timeout: float | None = None
    agent: str | None = None
    session_id: str | None = None

    kind: ClassVar[str] = "paused_run"

    def to_json(self) -> str:
        """The state as JSON text (:meth:`from_json` reads it back, in any process)."""
        return msgspec.json.encode(self).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> PausedRun:
        """The state :meth:`to_json` wrote: ``FormatUnsupported`` for a newer format version, ``StateInvalid``
        for a text that is not one."""
        try:
            data = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError) as error:
            raise StateInvalid(f"a paused run's state is not valid JSON ({error})") from None
        if not isinstance(data, dict):
            raise StateInvalid(f"a paused run's state is a JSON object, not {type(data).__name__}")
        version = data.get("version", STATE_VERSION)
        if type(version) is not int or version < 1:
            raise StateInvalid(f"a paused run's state has no valid format version: {version!r}")
        if version > STATE_VERSION:
            raise FormatUnsupported(
                f"this paused run's state is of format version {version}, written by a newer tether; "
                f"this one reads versions up to {STATE_VERSION}",
                details={"version": version, "supported": STATE_VERSION},
            )
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as error:
            raise StateInvalid(f"a paused run's state is damaged: {error}") from None

    @property
    def pending_ids(self) -> tuple[str, ...]:
        """The ids of the pending calls, in the model's order."""
        return tuple(call.id for call in self.pending)
