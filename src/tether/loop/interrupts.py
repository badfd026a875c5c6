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

Every such wait goes through :meth:`Interrupter.wait` (one await: a tool, the permission hook, a durable step)
or :meth:`Interrupter.watch` (a stream: armed around each item it waits for, disarmed while the host has it),
which state the steps and their order, so the provider call, the permission hook and the tool calls wait the
same way. The cancel and its bookkeeping (ours told from the host's) are :class:`~tether.alarms.TaskCanceller`'s,
as they are for every deadline on a wait.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from tether.alarms import Alarm, TaskCanceller, shared_alarm
from tether.errors import TimeoutExceeded
from tether.limits import StopReason

T = TypeVar("T")
U = TypeVar("U")
T_contra = TypeVar("T_contra", contravariant=True)
U_co = TypeVar("U_co", covariant=True)


class Interrupt(msgspec.Struct, frozen=True, gc=False):
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


class Interrupter(TaskCanceller):
    """Delivers cancel requests and deadlines to one run (see the module docstring). Its state is its own: the
    loop waits through :meth:`wait` and :meth:`watch`, checks with :meth:`check`, and reads :attr:`pending` and
    :attr:`after_turn`."""

    __slots__ = ("_alarm", "_armed", "_finished", "_loop", "_thread", "after_turn", "pending")

    def __init__(self) -> None:
        self.pending: Interrupt | None = None
        """The first interrupt requested, taken at the next chance."""
        self.after_turn: Interrupt | None = None
        """A cancel that waits for the current turn to finish."""
        self._armed = False
        """True while the run awaits its provider or a tool: an interrupt may cancel the task."""
        self._finished = False
        self._task = None
        self.sent = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._alarm: Alarm | None = None

    def attach(self) -> None:
        """Bind to the task now running the loop; called once when the run starts."""
        self._bind()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.current_thread()  # the thread itself: its id would be one more int a run

    def bind_here(self) -> tuple[Any, int, bool]:
        """Cancel the task running now from here on (the task a run's tool calls are settled in while the events
        of the agents they run are relayed: ``nesting.py``); what it was bound to, for :meth:`restore`."""
        bound = (self._task, self._cancelling, self.sent)
        self._bind()
        return bound

    def restore(self, bound: tuple[Any, int, bool]) -> None:
        """Bound again as before :meth:`bind_here`."""
        self._task, self._cancelling, self.sent = bound

    def request(self, interrupt: Interrupt, *, after_turn: bool = False) -> None:
        """Ask the run to stop; safe from any task or thread, and idempotent."""
        loop = self._loop
        if loop is not None and threading.current_thread() is not self._thread:
            loop.call_soon_threadsafe(functools.partial(self.request, interrupt, after_turn=after_turn))
            return
        if after_turn:
            self.after_turn = self.after_turn or interrupt
            return
        if self.pending is None:
            self.pending = interrupt  # also once closed: a relay's next run takes it (``reopen``)
        if self._finished:
            return
        if self._armed and self._task is not None and not self.sent:
            self.cancel()

    @property
    def armed(self) -> bool:
        """The run awaits its provider or a tool: an interrupt now cancels the wait (read-only)."""
        return self._armed

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
        self._finished = True

    def reopen(self) -> None:
        """Let one more run take this interrupter after the last closed it: the runs a relay of agents makes in
        turn (``tether.team``) are stopped by the one handle their host holds."""
        self._finished = False

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
           the task and raised as ``Interrupted``; the host's is raised as it is, also when both came;
        4. a wait that ended normally absorbs a cancel of ours that was sent but has not landed yet, so that it
           cannot hit the next unrelated await;
        5. whatever the way out, the interrupter is left disarmed.
        """
        if self.pending is not None:
            waited.close()  # never started: closed, so that it is not reported as never awaited
            raise Interrupted(self.pending)
        self._armed = True
        try:
            result = await waited
        except asyncio.CancelledError as cancelled:
            raise self._taken(cancelled) from None
        finally:
            self._armed = False
        if self.sent:
            await self.settle()
        return result

    def watch(self, stream: AsyncIterator[T], picker: Picker[T, U]) -> Watched[T, U]:
        """``stream`` seen through this interrupter: :meth:`Watched.next` awaits its items as :meth:`wait` awaits
        (armed, in its order of steps) and hands on what ``picker`` picks of them. The picker is told of every
        item while still armed (it must run none of the host's code); a picked item is handed on disarmed: the host's
        code, which runs between two picked items, never takes a cancel of ours, and an interrupt that came
        meanwhile is raised when the next is asked for. The watch holds nothing of its own to close; ``stream``'s
        owner closes it."""
        return Watched(self, stream, picker)

    def _taken(self, error: asyncio.CancelledError) -> BaseException:
        """What a ``CancelledError`` caught in an armed wait becomes: ``Interrupted`` when it was ours alone, the
        error itself when it was the host's (also when both came: theirs wins)."""
        if self.pending is None or not self.took():
            return error
        return Interrupted(self.pending)


class Picker(Protocol[T_contra, U_co]):
    """What a watch hands each item of its stream to: what of it to hand on, ``None`` for nothing. An item that
    shows more than one thing leaves the rest :attr:`held`: the watch hands it on, one :meth:`release` a call,
    before it waits for the next item."""

    @property
    def held(self) -> object | None: ...

    def pick(self, item: T_contra, /) -> U_co | None: ...

    def release(self) -> U_co: ...


class Watched(Generic[T, U]):
    """A stream seen through an :class:`Interrupter` (:meth:`Interrupter.watch`): armed while its items are awaited,
    disarmed while the host has one. ``while (item := await watched.next()) is not None``: one coroutine per item
    handed on, however many the stream gives, and no exception at its end (an async iterator's
    ``StopAsyncIteration``, raised again through one more frame, is the costliest part of a short stream)."""

    __slots__ = ("_interrupter", "_picker", "_stream")

    def __init__(self, interrupter: Interrupter, stream: AsyncIterator[T], picker: Picker[T, U]) -> None:
        self._interrupter = interrupter
        self._stream = stream
        """The stream and the picker themselves, not their bound methods: calling a method of an object binds
        nothing, while a bound method kept is one more object a run in flight holds."""
        self._picker = picker

    async def next(self) -> U | None:
        """The next item picked, or ``None`` at the end of the stream."""
        interrupter, stream, picker = self._interrupter, self._stream, self._picker
        if interrupter.pending is not None:
            raise Interrupted(interrupter.pending)
        if picker.held is not None:  # the rest of what the last item showed: handed on without a wait
            return picker.release()
        interrupter._armed = True
        try:
            while True:
                picked = picker.pick(await stream.__anext__())
                if picked is not None:
                    return picked
        except StopAsyncIteration:
            interrupter._armed = False
            if interrupter.sent:
                await interrupter.settle()
            return None
        except asyncio.CancelledError as cancelled:
            raise interrupter._taken(cancelled) from None
        finally:
            interrupter._armed = False
