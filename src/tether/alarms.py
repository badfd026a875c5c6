"""One timer per event loop for the deadlines of every run on it, re-armed lazily.

Every provider call has a deadline (``step_timeout``) and so has every tool call (``tool_timeout``), a run given
a ``run_timeout``, and every wait of an HTTP request for its provider's next bytes (``providers/stall.py``).
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

:class:`Deadline` is ``asyncio.timeout`` on an alarm: the task is cancelled when the deadline passes, and
leaving the block with that cancellation raises ``TimeoutError`` (a cancellation of the task from elsewhere
stays a cancellation). It is a plain ``with`` block, not ``async with``: entering and leaving it awaits nothing,
and a coroutine for each would be two more objects per tool call.
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


class Deadline:
    """``asyncio.timeout(delay)`` kept on an :class:`Alarm` (see the module docstring); ``delay`` ``None``: no
    deadline."""

    __slots__ = ("_alarm", "_cancelling", "_delay", "_expired", "_task")

    def __init__(self, alarm: Alarm, delay: float | None) -> None:
        """Use it inside a task, as ``with Deadline(alarm, seconds):``."""
        self._alarm = alarm
        self._delay = delay
        self._expired = False
        self._cancelling = 0
        self._task: asyncio.Task[object] | None = None

    def expired(self) -> bool:
        """Whether the deadline passed and cancelled the block."""
        return self._expired

    def __enter__(self) -> Deadline:
        if self._delay is not None:
            task = self._task = asyncio.current_task()
            assert task is not None, "Deadline is used inside a task"
            self._cancelling = task.cancelling()
            self._alarm.set(self, self._alarm.time() + self._delay, self._expire)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._task is None:
            return
        self._alarm.clear(self)
        if self._expired and self._task.uncancel() <= self._cancelling and kind is asyncio.CancelledError:
            raise TimeoutError from error

    def _expire(self) -> None:
        assert self._task is not None
        self._expired = True
        self._task.cancel()
