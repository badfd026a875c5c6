"""One timer per event loop for the deadlines of every run on it, re-armed lazily.

Every provider call has a deadline (``step_timeout``) and so has every tool call (``tool_timeout``), a run given
a ``run_timeout``, and every wait of an HTTP request for its provider's next bytes (:class:`Deadline`).
Arming an event-loop timer for each and cancelling it when the call ends, as ``loop.call_at`` or
``asyncio.timeout`` do, costs a timer object, a heap push and a cancellation per call, and leaves the cancelled
timers in the loop's heap: a good part of what a step costs the loop when the calls themselves are fast
(``bench/README.md``).

An :class:`Alarm` keeps deadlines as plain numbers and one loop timer set for the earliest of them. Setting a
deadline later than the timer, or withdrawing one, touches only a dict; only a deadline earlier than the timer
re-arms it. When the timer rings it fires what is due and re-arms for what is left, if anything. So fast calls
arm one timer when the first starts and then about one per ``tool_timeout`` of time, however many calls are
made; a deadline fires late by at most the loop's clock resolution, as with ``call_at``.

:func:`shared_alarm` is the one alarm of an event loop, on which every run and every HTTP client keeps its
deadlines (each under a key of its own): thousands of runs in flight are one timer in the loop's heap, not one
each (with its context and its callback, three objects more per run for the collector to walk).

:class:`Deadline` bounds a task's waits on an alarm: re-armed around each wait of an HTTP request (for its provider's
next bytes), or as a ``with`` block around a tool call, where it is ``asyncio.timeout`` (leaving the block with
its cancellation raises ``TimeoutError``). :class:`TaskCanceller` is the bookkeeping it shares with the run's
interrupter: a cancel of ours told from a cancel of the host's.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from types import TracebackType


class Alarm:
    """Deadlines on one event-loop timer (see the module docstring); the keys tell their owners apart."""

    __slots__ = ("_at", "_due", "_handle", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self._due: dict[object, tuple[float, Callable[[], object]]] = {}
        """Per key, when (loop time) and what to fire."""
        self._handle: weakref.ref[asyncio.TimerHandle] | None = None
        """The armed timer, weakly like the loop: the loop's own alarm (:func:`shared_alarm`) is kept in a table
        keyed by the loop, and a timer holds its loop: either, held strongly, would keep the loop alive for ever
        (the loop's heap holds the timer while it is armed)."""
        self._at: float | None = None
        """When the armed timer rings; ``None``: none is armed."""

    def set(self, key: object, when: float, fire: Callable[[], object]) -> None:
        """Call ``fire()`` at loop time ``when``, unless ``key`` is cleared (or set again) first."""
        self._due[key] = (when, fire)
        if self._at is None or when < self._at:
            self._arm(when)

    def clear(self, key: object) -> None:
        """Withdraw ``key``'s deadline; the timer stays armed and finds nothing due when it rings."""
        self._due.pop(key, None)

    def time(self) -> float:
        """The loop's clock (``_running``'s check inline: it is read for every deadline set)."""
        loop = self._loop()
        assert loop is not None, "an alarm is used on its own loop, which is alive while it runs"
        return loop.time()

    def _running(self) -> asyncio.AbstractEventLoop:
        loop = self._loop()
        assert loop is not None, "an alarm is used on its own loop, which is alive while it runs"
        return loop

    def _disarm(self) -> None:
        handle = self._handle() if self._handle is not None else None
        if handle is not None:
            handle.cancel()
        self._handle = self._at = None

    def _arm(self, when: float) -> None:
        self._disarm()
        self._at = when
        self._handle = weakref.ref(self._running().call_at(when, self._ring))

    def _ring(self) -> None:
        """Fire what is due, after re-arming for what is left: a callback that raises is reported to the loop
        and takes no other owner's deadline with it."""
        self._handle = self._at = None
        due = self._due
        if not due:
            return
        loop = self._running()
        now = loop.time()
        passed = [key for key, (when, _) in due.items() if when <= now]
        fired = [due.pop(key)[1] for key in passed]
        if due:
            self._arm(min(when for when, _ in due.values()))
        for fire in fired:
            try:
                fire()
            except Exception as error:  # noqa: BLE001 - reported where the loop reports callbacks' errors
                loop.call_exception_handler({"message": f"deadline callback {fire!r} failed", "exception": error})


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Alarm] = weakref.WeakKeyDictionary()


def shared_alarm(loop: asyncio.AbstractEventLoop) -> Alarm:
    """The alarm of ``loop`` (see the module docstring), made the first time it is asked for; call it on the
    loop's own thread."""
    alarm = _SHARED.get(loop)
    if alarm is None:
        alarm = _SHARED[loop] = Alarm(loop)
    return alarm


class TaskCanceller:
    """Cancels one task and tells its own cancellation from anyone else's: the bookkeeping every bound on a wait
    shares, as the base of each (a :class:`Deadline`, the run's :class:`~tether.loop.interrupts.Interrupter`).

    A ``CancelledError`` is ours when we sent a cancel and, once ours is withdrawn (``Task.uncancel``), no
    other request is left than the task had when the canceller was bound to it: a cancel from the host that
    came too stays a cancellation, whoever caught it.
    """

    __slots__ = ("_cancelling", "_task", "sent")

    def _bind(self) -> None:
        """Bind to the task running now: the one cancelled from then on."""
        task = asyncio.current_task()
        assert task is not None, "a wait is bounded inside a task"
        self._task: asyncio.Task[object] | None = task
        self._cancelling = task.cancelling()
        self.sent = False
        """A cancel of ours was sent and not yet taken back (read-only outside)."""

    def cancel(self) -> None:
        assert self._task is not None, "a canceller is bound before it cancels"
        self.sent = True
        self._task.cancel()

    def took(self) -> bool:
        """Called on a ``CancelledError``: whether it was ours alone. Ours is withdrawn either way, so that it
        cannot hit a later await."""
        if not self.sent or self._task is None:
            return False
        self.sent = False
        return self._task.uncancel() <= self._cancelling

    async def settle(self) -> None:
        """After a wait that ended normally: absorb a cancel of ours sent in the same turn of the loop (it has
        not landed yet, and would hit the next unrelated await). Re-raises a cancellation that is not ours."""
        if not self.sent:
            return
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            if not self.took():
                raise
            return
        self.took()


class Deadline(TaskCanceller):
    """How long the task that made it may wait, kept on an :class:`Alarm`; ``seconds`` ``None``: no bound.

    Re-armable: :meth:`start` before each wait, :meth:`stop` after it, so that the time between waits (a
    consumer acting on what a stream gave) never counts. When it passes, the task is cancelled; the code that
    catches the ``CancelledError`` asks :meth:`expired` whether it was this deadline (then the cancellation is
    withdrawn: it is a timeout) or a cancellation from elsewhere, which must go on.

    As a ``with`` block it is ``asyncio.timeout``: started on entry, stopped on exit, and leaving the block
    with its cancellation raises ``TimeoutError`` (:attr:`passed` then says it was this deadline). It is a
    plain ``with``, not ``async with``: entering and leaving awaits nothing.
    """

    __slots__ = ("_alarm", "passed", "seconds")

    def __init__(self, alarm: Alarm, seconds: float | None) -> None:
        """Made inside the task it bounds."""
        self._bind()
        self._alarm = alarm
        self.seconds = seconds
        self.passed = False
        """The deadline passed (and cancelled the task) at least once."""

    def start(self, seconds: float | None = None) -> None:
        """The task waits from now on, for at most ``seconds`` (this deadline's when not given)."""
        seconds = self.seconds if seconds is None else seconds
        if seconds is not None:
            alarm = self._alarm
            alarm.set(self, alarm.time() + seconds, self._expire)

    def stop(self) -> None:
        """The wait is over: its deadline is withdrawn."""
        self._alarm.clear(self)

    def expired(self) -> bool:
        """Called on a ``CancelledError``: whether this deadline caused it (its cancellation is then withdrawn)."""
        self._alarm.clear(self)
        return self.took()

    def _expire(self) -> None:
        self.passed = True
        self.cancel()

    def __enter__(self) -> Deadline:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
        if kind is asyncio.CancelledError and self.expired():
            raise TimeoutError from error
