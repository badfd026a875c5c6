"""What a tool and an agent's instructions may know of the run they serve: :class:`RunContext`.

A tool whose first parameter is annotated ``RunContext[Deps]`` (``ctx: RunContext[Deps]``) is handed one per
call; the parameter is left out of the schema the model sees, so the model can neither see nor forge it. An
agent's ``system=`` may be a function of one, evaluated when a run starts. A context holds the run's
dependencies (``run(..., deps=...)``: a user, a database handle; typed through ``Agent[Deps]``), and reads the
rest live from the run: its id, the turn, the usage and cost so far, the messages so far.

Nothing here is made for a run whose tools take no context and whose instructions are a plain string: the
context is built per call, only for the tools that ask for it.

A tool ends the run with an answer by raising :class:`Done` (or ``ctx.stop(answer)``, which raises it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, NoReturn, Protocol

from typing_extensions import TypeVar

from tether.errors import ConfigInvalid

if TYPE_CHECKING:
    from tether.messages import Message, ToolCall
    from tether.usage import Cost, Usage

__all__ = ["DepsT", "Done", "RunContext", "RunView", "SystemFunction", "check_deps"]

DepsT = TypeVar("DepsT", default=None)
"""The type of a run's dependencies (``Agent[Deps]``); ``None`` when an agent declares none."""


class Done(Exception):
    """Raise or return this from a tool to end the run; ``message`` becomes the run's final text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RunView(Protocol):
    """What a run shows its context, read when asked (the loop's ``RunProgress``)."""

    @property
    def run_id(self) -> str: ...
    @property
    def turn(self) -> int: ...
    @property
    def messages(self) -> tuple[Message, ...]: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def cost(self) -> Cost | None: ...
    def claim_transfer(self, turn: Message, call_id: str | None) -> str | None: ...


class RunContext(Generic[DepsT]):
    """The run a tool call or the instructions serve: ``deps`` as given to the run, the rest read live."""

    __slots__ = ("_view", "deps", "tool_call")

    def __init__(self, deps: DepsT, view: RunView, tool_call: ToolCall | None = None) -> None:
        self.deps = deps
        """What the run was given as ``deps=`` (``None`` when nothing was)."""
        self._view = view
        self.tool_call = tool_call
        """The call being answered; ``None`` for the instructions."""

    @property
    def run_id(self) -> str:
        return self._view.run_id

    @property
    def turn(self) -> int:
        """The turn under way: 0 before the first request, when the instructions are evaluated."""
        return self._view.turn

    @property
    def tool_call_id(self) -> str | None:
        return self.tool_call.id if self.tool_call is not None else None

    @property
    def tool_name(self) -> str | None:
        return self.tool_call.name if self.tool_call is not None else None

    @property
    def messages(self) -> tuple[Message, ...]:
        """The transcript so far, the system prompt first; for a tool, up to the answer that called it."""
        return self._view.messages

    @property
    def usage(self) -> Usage:
        """What the run's provider calls have used so far."""
        return self._view.usage

    @property
    def cost(self) -> Cost | None:
        """What the run has cost so far; ``None`` when the model's price is unknown."""
        return self._view.cost

    @property
    def retry(self) -> int:
        """How many of this tool's calls in a row, just before this one, ended in an error (a call the model is
        making again after its arguments were refused, say); 0 for the instructions."""
        call = self.tool_call
        if call is None:
            return 0
        failed = 0
        for message in reversed(self._view.messages):
            if message.role != "tool":
                continue
            for result in reversed(message.tool_results):
                if result.name != call.name or result.call_id == call.id:
                    continue
                if not result.is_error:
                    return failed
                failed += 1
        return failed

    def stop(self, answer: str) -> NoReturn:
        """End the run with ``answer`` as its final text (raises :class:`Done`)."""
        raise Done(answer)

    def __repr__(self) -> str:
        return f"RunContext(run_id={self.run_id!r}, turn={self.turn}, tool_call_id={self.tool_call_id!r})"


SystemFunction = Callable[[RunContext[Any]], str | Awaitable[str | None] | None]
"""``system=`` as a function of the run's context (sync or async): the system prompt, or ``None`` for none."""


def check_deps(deps: object, expected: type | None, where: str) -> None:
    """``ConfigInvalid`` unless ``deps`` is an instance of ``expected`` (its origin, for a generic alias such as
    ``dict[str, int]``; ``None`` or ``object``: anything goes). Checked when a run starts, before any request,
    so that a wrong object is not found mid-run by the first tool that touches it."""
    if expected is None or expected is object:
        return
    origin = getattr(expected, "__origin__", expected)
    if not isinstance(origin, type):
        return  # a Protocol alias, a Union, a NewType: nothing isinstance can check
    if origin is type(None):
        if deps is not None:
            raise ConfigInvalid(f"{where} takes no deps (deps_type is None), but the run was given a {_name(deps)}")
        return
    try:
        fits = isinstance(deps, origin)
    except TypeError:  # a runtime-uncheckable protocol
        return
    if not fits:
        given = "no deps" if deps is None else f"deps of type {_name(deps)}"
        raise ConfigInvalid(
            f"{where} needs deps of type {origin.__qualname__} (run(..., deps=...)), but the run was given {given}"
        )


def _name(value: object) -> str:
    return type(value).__qualname__
