"""Handoffs: an agent passes the conversation on to another, which answers from there.

``Agent(handoffs=[billing, Handoff(refunds, history=...)])`` offers the model one transfer tool per target
(``transfer_to_billing``, ...). When the model calls one, the call gets its result (``Transferred to billing.``),
so the transcript stays valid for any provider, and the same run goes on under the target: its model (of any
provider), its instructions, its tools, its handoffs and its output type, with the run's limits counted across
both (turns, tool calls, spend, ``run_timeout``). A ``HandoffTaken`` event marks the move, ``result.last_agent``
names the agent that answered, and every answer in the transcript names its agent (``speaker_of``), in a session
too. A turn that calls several transfer tools takes the first; the run relay is ``relay.py``'s.

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

from tether.errors import ConfigInvalid
from tether.messages import Message, transcript_problems
from tether.run_context import Done
from tether.tools.base import Tool

__all__ = ["Handoff", "HistoryFilter", "handoffs_of"]

HistoryFilter: TypeAlias = Callable[[tuple[Message, ...]], Sequence[Message]]
"""What a handoff's target sees of the conversation: ``filter(messages) -> messages``."""


class Handoff:
    """A transfer to ``agent`` (an ``Agent`` with a ``name``), with its options: the tool's ``name`` (by default
    ``transfer_to_<agent's name>``), its ``description`` for the model, and the ``history`` filter of what the
    target sees (see the module docstring)."""

    __slots__ = ("agent", "description", "history", "name", "target")

    def __init__(
        self,
        agent: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        history: HistoryFilter | None = None,
    ) -> None:
        target = getattr(agent, "name", None)
        if not hasattr(agent, "_team_member") or not isinstance(target, str) or not target:
            kind = type(agent).__name__
            raise ConfigInvalid(f"a handoff's target must be an Agent with a name (Agent(..., name='x')), not {kind}")
        if history is not None and not callable(history):
            kind = type(history).__name__
            raise ConfigInvalid(f"a handoff's history must be a function of the messages, not {kind}")
        self.agent = agent
        self.target = target
        """The name of the agent the conversation passes to."""
        self.name = name if name is not None else f"transfer_to_{_slug(target)}"
        self.description = (
            description
            if description is not None
            else f"Transfer the conversation to {target}, who takes it from here. Call it alone, with no arguments."
        )
        self.history = history

    def tool(self) -> Tool:
        """The transfer tool the model is offered: it ends the current agent's part with a ``Done``. It changes
        nothing, so a read-only agent offers it too."""
        message = f"Transferred to {self.target}."

        def transfer(arguments: dict[str, Any]) -> Done:
            return Done(message)

        return Tool.from_schema(
            self.name,
            self.description,
            {"type": "object", "properties": {}},
            transfer,
            extra_arguments="ignore",
            read_only=True,
        )

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
        return f"Handoff({self.target!r}, name={self.name!r})"


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


def _slug(name: str) -> str:
    """``name`` as a tool name's tail: letters, digits and ``_`` only."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "agent"
