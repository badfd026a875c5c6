"""What a run's context reads of it: :class:`RunProgress`, the run's live view (``tether.run_context``).

A run makes one only when something asks for its context (a tool whose first parameter is a ``RunContext``,
or ``system=`` given as a function); it holds the run's ``deps`` and reads the rest from the run's state and
guard when a context asks, so a tool reads the usage and the transcript as they are at its call.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigInvalid
from tether.run_context import RunContext
from tether.tools.threads import run_in_tool_thread

if TYPE_CHECKING:
    from tether.loop.guard import LoopGuard
    from tether.loop.nesting import Nesting
    from tether.loop.spec import RunSpec
    from tether.loop.state import RunState
    from tether.messages import Message, ToolCall
    from tether.usage import Cost, Usage


class RunProgress:
    """One run as its contexts see it: its id and ``deps``, its turn, transcript, usage and cost so far."""

    __slots__ = ("_guard", "_state", "_transfer", "deps", "nesting", "run_id")

    def __init__(self, run_id: str, deps: Any, state: RunState, guard: LoopGuard) -> None:
        self.run_id = run_id
        self.deps = deps
        self._state = state
        self._guard = guard
        self.nesting: Nesting | None = None
        """What an agent this run runs as a tool shares with it (``nesting.py``); ``None``: the run has none."""
        self._transfer: tuple[Message, str | None] | None = None

    def claim_transfer(self, turn: Message, call_id: str | None) -> str | None:
        """The handoff ``turn`` takes (``team/handoffs.py``: one a turn): the id of the first of its transfer
        calls to claim it, ``call_id`` when none did before. Kept by the run, so runs never see each other's."""
        if self._transfer is not None and self._transfer[0] is turn:
            return self._transfer[1]
        self._transfer = (turn, call_id)
        return call_id

    @property
    def turn(self) -> int:
        return self._state.turn

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._state.transcript)

    @property
    def usage(self) -> Usage:
        return self._guard.usage

    @property
    def cost(self) -> Cost | None:
        return self._guard.cost

    def context(self, call: ToolCall | None = None) -> RunContext[Any]:
        """A context for ``call`` (``None``: for the run's instructions)."""
        return RunContext(self.deps, self, call)


async def system_text(spec: RunSpec, context: RunContext[Any]) -> str | None:
    """The run's system prompt: ``spec.system_function`` of ``context`` (awaited, or on a tool thread when it is
    synchronous: it may read a file or a database), then the run's own ``instructions``. What the function
    raises, or a value that is not a string or ``None``, is ``ConfigInvalid`` naming it: the run stops before
    any request, with that error."""
    function = spec.system_function
    assert function is not None, "only a run with a system function asks for its text"
    try:
        if inspect.iscoroutinefunction(function):
            text = await function(context)
        else:
            text = await run_in_tool_thread(functools.partial(function, context))
            if inspect.isawaitable(text):  # a callable object whose __call__ is async
                text = await text
    except Exception as error:
        name = getattr(function, "__qualname__", type(function).__qualname__)
        raise ConfigInvalid(f"the agent's system function {name} failed: {type(error).__name__}: {error}") from error
    if text is not None and not isinstance(text, str):
        name = getattr(function, "__qualname__", type(function).__qualname__)
        raise ConfigInvalid(f"the agent's system function {name} returned a {type(text).__name__}, not a string")
    return joined_instructions(text, spec.instructions)


def joined_instructions(system: str | None, instructions: str | None) -> str | None:
    """The system prompt, then a run's own instructions after a blank line (either may be missing)."""
    if not instructions:
        return system
    return instructions if not system else f"{system}\n\n{instructions}"
