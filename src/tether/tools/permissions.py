"""Who may run what: a mode, a deny list, and a hook asked before every call.

The contract
------------
* **Mode.** ``read-only`` offers the model only tools marked ``read_only`` (they look, never change);
  ``full`` offers every tool. A tool outside the mode is not shown to the model, and a call to it anyway is
  refused.
* **Deny list.** Tools named there are never shown and never run.
* **Hook.** ``can_use_tool(call)`` is asked before every execution, in the model's order, once per call (so
  each of several parallel calls gets its own decision). It returns :class:`Allow`, :class:`Deny` (with a
  reason the model reads) or :class:`Ask`. It may be async.
* **Ask.** With an ``approve(call, reason)`` callback, the run waits for it to answer yes or no: the CLI asks
  its user, a library caller supplies the callback; the wait can be cancelled like any other wait of the run.
  With no ``approve``, the call is *deferred*: it does not run, and once the turn's other calls are settled the
  run stops ``paused`` with the call pending, to be resumed later, maybe in another process, with a decision
  (``Agent.resume``, ``tether.paused``, docs/approvals.md).
* **Approval tools.** A tool made with ``approval=True`` needs the same yes for every call (after the hook, if
  it allowed the call): asked inline through ``approve``, else deferred. A tool made with ``external=True``
  never runs here: every call of it is deferred, its result to come from outside, unless the hook denies it.
* A refusal of any kind becomes an error result with code ``permission_denied``; the run goes on and the
  model can try something else.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from tether.errors import ConfigInvalid
from tether.messages import ToolCall
from tether.tools.base import Tool


class Mode(StrEnum):
    READ_ONLY = "read-only"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; ``reason`` is what the model reads."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask the host (``approve``) before running the call; ``reason`` says why approval is needed."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class Deferred:
    """The call waits for a decision from outside the run (no one here can approve it): the run pauses."""

    reason: str


Decision: TypeAlias = Allow | Deny | Ask
PermissionHook: TypeAlias = Callable[[ToolCall], "Decision | Awaitable[Decision]"]
Approver: TypeAlias = Callable[[ToolCall, str], "bool | Awaitable[bool]"]


@dataclass(frozen=True, slots=True)
class Permissions:
    """The permission settings of a run (see the module docstring)."""

    mode: Mode = Mode.FULL
    deny: frozenset[str] = frozenset()
    can_use_tool: PermissionHook | None = None
    approve: Approver | None = None

    @classmethod
    def of(
        cls,
        mode: Mode | str = Mode.FULL,
        deny: Iterable[str] = (),
        can_use_tool: PermissionHook | None = None,
        approve: Approver | None = None,
    ) -> Permissions:
        try:
            checked = Mode(mode)
        except ValueError:
            raise ConfigInvalid(f"tool mode must be 'read-only' or 'full', not {mode!r}") from None
        return cls(checked, frozenset(deny), can_use_tool, approve)

    def offers(self, tool: Tool) -> bool:
        """Whether the model is shown ``tool`` (the mode and the deny list allow it)."""
        return self.refusal(tool) is None

    def refusal(self, tool: Tool) -> str | None:
        """Why the mode or the deny list rules ``tool`` out, or ``None``."""
        if tool.name in self.deny:
            return f"the tool {tool.name!r} is denied by this agent's configuration"
        if self.mode is Mode.READ_ONLY and not tool.read_only:
            return f"the tool {tool.name!r} can change things, and this run is in read-only mode"
        return None

    async def refused(self, call: ToolCall) -> str | None:
        """Why the hook denies ``call``, or ``None`` (it allowed or asked): an external call waits for its result
        either way, unless the hook denies it."""
        if self.can_use_tool is None:
            return None
        outcome = self.can_use_tool(call)
        decision: Decision = await outcome if inspect.isawaitable(outcome) else outcome
        return (decision.reason or "the host denied this call") if isinstance(decision, Deny) else None

    async def decide(self, call: ToolCall, tool: Tool | None = None) -> str | Deferred | None:
        """Ask the hook (and, for :class:`Ask` or a ``tool`` that needs approval, the approver); ``None`` to run,
        a :class:`Deferred` when no approver is there to ask, else why not."""
        reason: str | None = None
        if self.can_use_tool is not None:
            outcome = self.can_use_tool(call)
            decision: Decision = await outcome if inspect.isawaitable(outcome) else outcome
            if isinstance(decision, Deny):
                return decision.reason or "the host denied this call"
            if isinstance(decision, Ask):
                reason = decision.reason
        if reason is None and tool is not None and tool.approval:
            reason = f"the tool {tool.name!r} needs approval for every call"
        if reason is None:
            return None
        if self.approve is None:
            return Deferred(reason or "the host asked for approval of this call")
        answer = self.approve(call, reason)
        approved: bool = await answer if inspect.isawaitable(answer) else answer
        return None if approved else "the user did not approve this call"
