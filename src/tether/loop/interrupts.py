"""Cancellation and deadlines: how a run is interrupted.

The contract
------------
* ``cancel()`` on a run's handle or stream stops the run *now*. If the run is waiting on its provider or on a
  tool, that wait is cancelled at once (an async tool's coroutine is cancelled; a synchronous tool's thread
  cannot be stopped and is abandoned). If the run is handing an event to its host, it stops as soon as the
  host asks for the next one. ``cancel(after_turn=True)`` lets the current turn, tool calls included, finish.
* Either way the run ends like any other: a ``RunCompleted`` event and a ``RunResult`` with
  ``StopReason.CANCELLED``, the usage so far, and a valid transcript: every tool call without a result gets a
  synthetic ``cancelled`` error result. A turn that was still streaming is left out of the transcript.
* Deadlines (``request_timeout`` for the first event, ``step_timeout`` per provider call, ``run_timeout``)
  interrupt the same way and end the run with ``StopReason.TIMEOUT``.
* A ``CancelledError`` that tether did not cause (the host cancelled the task driving the run) is never
  swallowed: the run closes its open tool calls and re-raises, so ``asyncio.timeout`` and ``TaskGroup`` keep
  working around it.

How
---
An :class:`Interrupter` belongs to one run. The loop *arms* it only while it awaits its provider or a tool;
only then does an interrupt cancel the run's task. Otherwise (the run is suspended at a ``yield``, with the
host's code running on the same task) the interrupt is recorded and raised when the loop resumes. A cancel
must never land in the host's code: it would look like the host had been cancelled.

Every such wait goes through :meth:`Interrupter.wait`, which states the steps and their order, so the provider
call, the permission hook and the tool calls wait the same way.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from tether.alarms import Alarm, shared_alarm
from tether.errors import TimeoutExceeded
from tether.limits import StopReason
from tether.quickinit import quick_init

T = TypeVar("T")


@quick_init
@dataclass(frozen=True, slots=True)
class Interrupt:
    """Why a run was interrupted: the stop it leads to and a sentence for people."""

    reason: StopReason
    detail: str
    error: Exception | None = None


def deadline_passed(limit: str, seconds: float | None) -> Interrupt:
    """The interrupt a deadline (``run_timeout``, ``step_timeout``) fires, made when it fires."""
    detail = f"{limit} of {seconds:g} s passed" if seconds is not None else f"{limit} passed"
    return Interrupt(StopReason.TIMEOUT, detail, TimeoutExceeded(detail, details={"deadline": limit}))


class Interrupted(Exception):
    """Raised inside the loop when an interrupt is taken; carries the :class:`Interrupt`."""

    def __init__(self, interrupt: Interrupt) -> None:
        super().__init__(interrupt.detail)
        self.interrupt = interrupt


class Interrupter:
    """Delivers cancel requests and deadlines to one run (see the module docstring)."""

    __slots__ = ("_alarm", "_fired", "_loop", "_task", "_thread", "after_turn", "armed", "finished", "pending")

    def __init__(self) -> None:
        self.armed = False
        """True while the run awaits its provider or a tool: an interrupt may cancel the task."""
        self.pending: Interrupt | None = None
        """The first interrupt requested, taken at the next chance."""
        self.after_turn: Interrupt | None = None
        """A cancel that waits for the current turn to finish."""
        self.finished = False
        self._fired = False
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._alarm: Alarm | None = None

    def attach(self) -> None:
        """Bind to the task now running the loop; called once when the run starts."""
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def request(self, interrupt: Interrupt, *, after_turn: bool = False) -> None:
        """Ask the run to stop; safe from any task or thread, and idempotent."""
        loop = self._loop
        if loop is not None and threading.get_ident() != self._thread:
            loop.call_soon_threadsafe(functools.partial(self.request, interrupt, after_turn=after_turn))
            return
        if self.finished:
            return
        if after_turn:
            self.after_turn = self.after_turn or interrupt
            return
        if self.pending is None:
            self.pending = interrupt
        if self.armed and not self._fired and self._task is not None:
            self._fired = True
            self._task.cancel()

    @property
    def alarm(self) -> Alarm:
        """Where the run's deadlines are kept (the step's, under this interrupter's key; its tool calls'): its
        event loop's one lazily re-armed timer (``tether/alarms.py``). Each is withdrawn by the code that set it,
        when the wait it bounds ends."""
        if self._alarm is None:
            self._alarm = shared_alarm(self._loop or asyncio.get_running_loop())
        return self._alarm

    def close(self) -> None:
        """The run is over: later requests are ignored (its deadlines were withdrawn as its waits ended)."""
        self.finished = True

    def check(self) -> None:
        """Raise ``Interrupted`` if an interrupt is pending."""
        if self.pending is not None:
            raise Interrupted(self.pending)

    async def wait(self, waited: Coroutine[Any, Any, T]) -> T:
        """Await ``waited`` (the provider, a tool, the permission hook) interruptibly; its result.

        The contract, in this order:

        1. arm the interrupter, or raise ``Interrupted`` at once if an interrupt is already pending (the
           provider is not asked, the tool does not start);
        2. while armed, an interrupt cancels the task;
        3. a ``CancelledError`` out of the wait is ours (an interrupt) or the host's: ours is withdrawn from
           the task and raised as ``Interrupted`` (:meth:`taken`); the host's is raised as it is, also when
           both came;
        4. a wait that ended normally absorbs a cancel of ours that was sent but has not landed yet
           (:meth:`settle`), so that it cannot hit the next unrelated await;
        5. whatever the way out, the interrupter is left disarmed.

        A streamed provider call is the one wait that cannot be a single await: its deltas are handed to the
        host mid-wait. It takes the same steps in the same order around its ``async for``, disarming before
        each ``yield`` and calling :meth:`arm` after it (``loop/calls.py``). Neither is an ``async with``: a
        context manager's calls cost the hot path thousands of instructions a step (``bench/instructions.py``).
        """
        if self.pending is not None:
            waited.close()  # never started: closed, so that it is not reported as never awaited
            raise Interrupted(self.pending)
        self.armed = True
        try:
            result = await waited
        except asyncio.CancelledError as cancelled:
            raise self.taken(cancelled) from None
        except BaseException:
            self.armed = False
            raise
        if self._fired:
            await self.settle()
        else:
            self.armed = False
        return result

    def arm(self) -> None:
        """Enter (or go back into) an interruptible wait; raises at once if an interrupt is already pending."""
        if self.pending is not None:
            raise Interrupted(self.pending)
        self.armed = True

    def taken(self, error: asyncio.CancelledError) -> Interrupted:
        """Turn a ``CancelledError`` caught in an armed wait into ``Interrupted``, or re-raise it if it is not ours."""
        self.armed = False
        if not self._fired or self.pending is None:
            raise error
        self._fired = False
        assert self._task is not None
        if self._task.uncancel() > 0:
            raise error  # the host cancelled us too: theirs wins
        return Interrupted(self.pending)

    async def settle(self) -> None:
        """After an armed wait that ended normally: absorb a cancel we sent that has not landed yet.

        A timer can fire in the same loop iteration as the awaited thing completes; the task then carries a
        cancel request that would hit the next unrelated await. Only called when that can have happened.
        """
        self.armed = False
        if not self._fired:
            return
        self._fired = False
        assert self._task is not None
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            if self._task.uncancel() > 0:
                raise  # the host cancelled us too: theirs wins
            return
        self._task.uncancel()

    @property
    def fired(self) -> bool:
        """A cancel of ours was sent during the current wait (so it must be settled if the wait ends normally)."""
        return self._fired
