"""The step seam: how a durable engine wraps each provider call and each tool call of a run.

Contract. A :class:`StepRunner` is handed to a run (``Run(steps=...)``); the loop then calls
:meth:`StepRunner.step` around every provider call and every tool call, with a stable ``name`` and a
coroutine function that produces the step's result:

* a provider call's step returns its whole :class:`~tether.loop.accumulator.AccumulatedTurn` (message,
  usage, finish reason, ids): the call runs to its end inside the step, its deltas reaching the run's sinks
  as they come;
* a tool call's step returns a :class:`ToolOutcome` (the ``ToolResult``, how long the tool ran, the
  ``Done`` that ended the run, if any).

A runner either runs the function and keeps its result (or its exception), or, when the step already
finished in an earlier execution of the same run, returns what was kept without running it. Step results
are plain values a runner can serialize (structs, text, exceptions: the durable runner keeps them as
versioned JSON, ``tether.durable.formats``); an exception that would not survive the trip (one holding a lock,
of a class defined in a function: ``executor.portable`` tries a pickle round trip) is reduced to a ``ToolError``.
Steps are named and called in the same order on every execution of a run, because the loop's control flow
depends only on the run's inputs and the steps' results; the run id is the runner's (the engine's workflow
id), not a fresh one.

At-least-once. A step interrupted mid-way (the process died) runs again when the run is recovered. A tool
that must not run twice declares it (``@tool(idempotent=False)``): :func:`at_most_once` then answers an
interrupted call of it with an error result saying it may or may not have happened, instead of running it
again. A runner needs nothing more than :meth:`StepRunner.step` for that: a marker step taken before the
call tells a fresh start from a recovery.

Time. A run's deadline (``Limits.run_timeout``) counts from when the run first started, not from when this
execution of it did: :func:`elapsed` keeps the start's wall-clock time as the run's first step (``run:started``;
only a run with a deadline takes it), so that a run recovered after its deadline stops at once and one recovered
before it gets only what is left.

Retry waits. A runner that has ``async def sleep(seconds)`` (a durable sleep: its end kept, so that an execution
after a crash waits only what is left) gets the provider's retry waits as such: the model call's step ends at
its first failed attempt with :class:`RetryLater`, kept as the step's exception; the loop sleeps, and makes the
next attempt as a step of its own (``model:T.A~N``, ``N`` the retries made), the provider's ladder counting on
from ``N``. A runner without it lets the provider wait inside the step, as a plain run does.

Calls made again. A runner may say which step an execution of a recovered run ran first after replaying
kept ones (``resumed``, the step's name): the step the crash interrupted, or the one after it. When that is a
model call, the run's records get one for the interrupted attempt before the one made again (``error``
``"interrupted"``, no usage: the provider never said what it used), so that the result says a call was made
again and that its first attempt is not counted; the usage counts the call made again like any other.

Without a runner (the default) the loop calls the provider and the tools directly; the only cost is one
``is None`` check per call.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import msgspec

if TYPE_CHECKING:
    from tether.messages import ToolResult
    from tether.tools.base import Done

T = TypeVar("T")


class StepRunner(Protocol):
    """Runs the steps of one run durably (see the module docstring)."""

    @property
    def run_id(self) -> str:
        """The run's id: the same on every execution of the run (the engine's workflow id)."""
        ...

    async def step(self, name: str, function: Callable[[], Awaitable[T]]) -> T:
        """``function()``'s result, kept; or the result kept by an earlier execution, without running it.

        An exception ``function`` raises is kept and raised again likewise."""
        ...


class ToolOutcome(msgspec.Struct, frozen=True):
    """What became of one tool call: the value a tool call's step returns."""

    result: ToolResult | None
    """The call's result; ``None`` when the tool ended the run (``done``)."""
    ran: float | None
    """How long the tool ran, in milliseconds."""
    error: BaseException | None = None
    """The exception behind an error result (reduced to a ``ToolError`` inside a step)."""
    done: Done | None = None


INTERRUPTED = "The call of tool {name!r} was interrupted (the process running it stopped) and is not safe to "
INTERRUPTED += "repeat: it may or may not have happened. Check its effect before calling it again."


async def at_most_once(
    runner: StepRunner, name: str, function: Callable[[], Awaitable[T]], interrupted: Callable[[], T]
) -> T:
    """The step ``name`` for a call that must not run twice: ``function()`` on a fresh start, its kept result
    once it finished, and ``interrupted()`` (kept as the step's result) when an earlier execution started it
    but did not finish it."""
    token = uuid.uuid4().hex

    async def mark() -> str:
        return token

    started = await runner.step(f"{name}:started", mark)
    if started == token:
        return await runner.step(name, function)

    async def answer() -> T:
        return interrupted()

    return await runner.step(name, answer)


RUN_STARTED = "run:started"
"""The step that keeps when a run first started (:func:`elapsed`)."""


async def _now() -> float:
    return time.time()


async def elapsed(runner: StepRunner) -> float:
    """Seconds since the run ``runner`` runs first started (its wall-clock start, kept as the step
    ``run:started``): what a recovered execution has already spent of the run's deadline. Wall-clock time, so
    that it holds across processes and machines (whose clocks are assumed to agree)."""
    started = await runner.step(RUN_STARTED, _now)
    return max(0.0, time.time() - started)


class RetryLater(Exception):
    """A durable run's model call failed and is to be tried again after ``wait`` seconds: the step's end (see the
    module docstring). ``retried`` is the number of retries made, this one included; ``code``, ``message`` and
    ``status`` are the failure's (masked). Plain values only, so that a runner keeps and raises it again."""

    def __init__(self, wait: float, retried: int, code: str, message: str, status: int | None) -> None:
        super().__init__(wait, retried, code, message, status)
        self.wait, self.retried, self.code, self.message, self.status = wait, retried, code, message, status

    def __str__(self) -> str:
        return f"retry {self.retried} in {self.wait:.3g}s after: {self.message}"


def new_run_id() -> str:
    """A run's id: 32 hex digits of a random version-4 UUID, as ``uuid.uuid4().hex`` writes it, for a sixth of its
    cost (the ``UUID`` class checks and keeps what a run id never needs; a run makes one before it starts)."""
    value = int.from_bytes(os.urandom(16), "big") & _UUID4_KEEP | _UUID4_SET
    return f"{value:032x}"


_UUID4_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
"""The random bits of a UUID: all but its version (4 bits) and its variant (2 bits)."""
_UUID4_SET = (4 << 76) | (0x8000 << 48)
"""Version 4, variant RFC 4122 (``uuid.UUID(int=..., version=4)`` sets the same bits)."""
