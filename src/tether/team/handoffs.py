"""Handoffs: an agent passes the conversation on to another, which answers from there.

``Agent(handoffs=[billing, Handoff(refunds, history=...)])`` offers the model one transfer tool per target
(``transfer_to_billing``, ...). When the model calls one, the call gets its result (``Transferred to billing.``),
so the transcript stays valid for any provider, and the same run goes on under the target: its model (of any
provider), its instructions, its tools, its handoffs and its output type, with the run's limits counted across
both (turns, tool calls, spend, ``run_timeout``). A ``HandoffTaken`` event marks the move, ``result.last_agent``
names the agent that answered, and every answer in the transcript names its agent (``speaker_of``), in a session
too. One handoff per turn: of a turn's transfer calls the first to run is taken, and the others get an error
result (the conversation went elsewhere), so the transcript never says they were made. The run relay is ``relay.py``'s.

A target may be given as a function that returns it (``Handoff(lambda: triage, name=...)``), called when the
transfer is taken: an agent can then hand off to one built after it, and agents can hand off in a cycle, which
the run's limits bound (``max_turns`` counts every agent's turns).

The history the target sees is the whole conversation (its own system prompt in place of the other's), or what
``Handoff(..., history=filter)`` keeps of it: ``filter(messages) -> messages``, given the conversation without
the system prompt and the transfer's call and result last. The filtered history must be a valid transcript that
ends where the model speaks next (a user message or tool results): a filter that separates a tool call from its
result (or drops what a result answers) stops the run with ``error`` (``config_invalid``, naming the filter and
what it broke); tether does not repair it, since which half to keep is the filter's call. In a session, the
filtered history is what the session holds from then on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias

from tether.errors import ConfigInvalid, ToolError
from tether.messages import Message, transcript_problems
from tether.run_context import Done, RunContext
from tether.tools.base import Tool
from tether.tools.schema import ContextParameter, JsonSchemaValidator

__all__ = ["Handoff", "HistoryFilter", "handoffs_of"]

HistoryFilter: TypeAlias = Callable[[tuple[Message, ...]], Sequence[Message]]
"""What a handoff's target sees of the conversation: ``filter(messages) -> messages``."""


class Handoff:
    """A transfer to ``agent`` (an ``Agent`` with a ``name``), with its options: the tool's ``name`` (by default
    ``transfer_to_<agent's name>``), its ``description`` for the model, and the ``history`` filter of what the
    target sees (see the module docstring)."""

    __slots__ = ("_agent", "_lazy", "description", "history", "name")

    def __init__(
        self,
        agent: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        history: HistoryFilter | None = None,
    ) -> None:
        self._lazy = not hasattr(agent, "_team_member") and callable(agent)
        if self._lazy and name is None:
            raise ConfigInvalid("a handoff to an agent given by a function (Handoff(lambda: agent, ...)) needs a name=")
        if history is not None and not callable(history):
            kind = type(history).__name__
            raise ConfigInvalid(f"a handoff's history must be a function of the messages, not {kind}")
        self._agent = agent
        target = None if self._lazy else _target(agent)
        self.name = name if name is not None else f"transfer_to_{_slug(target or '')}"
        if description is None:
            whom = f"to {target}" if target is not None else "to the agent this tool names"
            description = f"Transfer the conversation {whom}, who takes it from here. Call it alone, with no arguments."
        self.description = description
        self.history = history

    @property
    def agent(self) -> Any:
        """The agent the conversation passes to (a function's, called now, when the handoff was given one);
        ``ConfigInvalid`` when it gives no Agent with a name."""
        if not self._lazy:
            return self._agent
        agent = self._agent()
        _target(agent)
        return agent

    @property
    def target(self) -> str:
        """The name of the agent the conversation passes to."""
        return str(self.agent.name)

    def tool(self, team: Sequence[Handoff] = ()) -> Tool:
        """The transfer tool the model is offered: it ends the current agent's part with a ``Done``. Of the
        transfer calls of one turn (to any of ``team``, its agent's handoffs) only the first is taken: the others
        fail, so the transcript never says they were made. It changes nothing, so a read-only agent offers it too."""
        transfers = {handoff.name: handoff for handoff in (*team, self)}

        async def transfer(ctx: RunContext[Any], arguments: dict[str, Any]) -> Done:
            turn = _turn_of(ctx)
            taken = ctx._view.claim_transfer(turn, ctx.tool_call_id) if turn is not None else ctx.tool_call_id
            if turn is not None and taken != ctx.tool_call_id:
                went = next((call.name for call in turn.tool_calls if call.id == taken), "")
                shown = transfers[went]._shown() if went in transfers else went
                raise ToolError(f"Not transferred: the conversation went to {shown}; one handoff per turn.")
            return Done(f"Transferred to {self._shown()}.")

        validator = JsonSchemaValidator(self.name, {"type": "object", "properties": {}}, ignore_extra=True)
        validator.context = ContextParameter("ctx", None)
        return Tool(self.name, self.description, transfer, validator, read_only=True)

    def _shown(self) -> str:
        """The target's name for the model; the tool's, when a function gives no agent (the relay then stops
        the run as ``error``, naming what is wrong)."""
        try:
            return self.target
        except ConfigInvalid:
            return self.name

    def filtered(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """What the target sees of ``messages`` (the conversation, without a system prompt); ``ConfigInvalid``
        when the filter broke it (see the module docstring)."""
        given = tuple(messages)
        if self.history is None:
            return given
        kept = tuple(self.history(given))
        if not all(isinstance(message, Message) for message in kept):
            raise ConfigInvalid(f"the history filter of handoff {self.name!r} must give Messages")
        if problems := transcript_problems(kept):
            detail = "; ".join(problems[:3])
            raise ConfigInvalid(
                f"the history filter of handoff {self.name!r} gave an invalid transcript (a tool call and its result "
                f"are kept or dropped together): {detail}"
            )
        return kept

    def __repr__(self) -> str:
        target = "<function>" if self._lazy else repr(self.target)
        return f"Handoff({target}, name={self.name!r})"


def handoffs_of(given: Iterable[Any]) -> tuple[Handoff, ...]:
    """``Agent(handoffs=...)`` as :class:`Handoff`s (an ``Agent`` stands for ``Handoff(agent)``), their tool
    names distinct; ``ConfigInvalid`` otherwise."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
        raise ConfigInvalid(f"handoffs must be a list of agents or Handoffs, not {type(given).__name__}")
    handoffs = tuple(item if isinstance(item, Handoff) else Handoff(item) for item in given)
    names = [handoff.name for handoff in handoffs]
    if twice := sorted({name for name in names if names.count(name) > 1}):
        raise ConfigInvalid(f"two handoffs have the tool name {twice[0]!r}: give one a name=")
    return handoffs


def _target(agent: Any) -> str:
    """The name of ``agent``, a handoff's target; ``ConfigInvalid`` unless it is an Agent with a name."""
    target = getattr(agent, "name", None)
    if not hasattr(agent, "_team_member") or not isinstance(target, str) or not target:
        kind = type(agent).__name__
        raise ConfigInvalid(f"a handoff's target must be an Agent with a name (Agent(..., name='x')), not {kind}")
    return target


def _turn_of(ctx: RunContext[Any]) -> Message | None:
    """The assistant message whose call ``ctx`` serves (``None`` outside a run)."""
    for message in reversed(ctx.messages):
        if message.role == "assistant" and any(call.id == ctx.tool_call_id for call in message.tool_calls):
            return message
    return None


def _slug(name: str) -> str:
    """``name`` as a tool name's tail: letters, digits and ``_`` only."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "agent"
