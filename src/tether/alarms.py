"""One timer per run for all its deadlines, re-armed lazily.

Every provider call has a deadline (``step_timeout``) and so has every tool call (``tool_timeout``). Arming an
event-loop timer for each and cancelling it when the call ends, as ``loop.call_at`` or ``asyncio.timeout`` do,
costs a timer object, a heap push and a cancellation per call, and leaves the cancelled timers in the loop's
heap: a good part of what a step costs the loop when the calls themselves are fast (``bench/README.md``).

An :class:`Alarm` keeps a run's deadlines as plain numbers and one loop timer set for the earliest of them.
Setting a deadline later than the timer, or withdrawing one, touches only a dict; only a deadline earlier than
the timer re-arms it. When the timer rings it fires what is due and re-arms for what is left, if anything. So
a run of fast calls arms one timer when its first call starts and then about one per ``tool_timeout`` of run
time, however many calls it makes; a deadline fires late by at most the loop's clock resolution, as with
``call_at``.

:class:`Deadline` is ``asyncio.timeout`` on a run's alarm: the task is cancelled when the deadline passes, and
leaving the block with that cancellation raises ``TimeoutError`` (a cancellation of the task from elsewhere
stays a cancellation). It is a plain ``with`` block, not ``async with``: entering and leaving it awaits nothing,
and a coroutine for each would be two more objects per tool call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType


class Alarm:
    """A run's deadlines on one event-loop timer (see the module docstring)."""

    __slots__ = ("_at", "_due", "_handle", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: dict[object, tuple[float, Callable[[], object]]] = {}
        """Per key, when (loop time) and what to fire."""
        self._handle: asyncio.TimerHandle | None = None
        self._at = 0.0
        """When the armed timer rings."""

    def set(self, key: object, when: float, fire: Callable[[], object]) -> None:
        """Call ``fire()`` at loop time ``when``, unless ``key`` is cleared (or set again) first."""
        self._due[key] = (when, fire)
        if self._handle is None or when < self._at:
            self._arm(when)

    def clear(self, key: object) -> None:
        """Withdraw ``key``'s deadline; the timer stays armed and finds nothing due when it rings."""
        self._due.pop(key, None)

    def close(self) -> None:
        """Withdraw every deadline and disarm: the run is over, nothing of it stays on the loop."""
        self._due.clear()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def time(self) -> float:
        return self._loop.time()

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._at = when
        self._handle = self._loop.call_at(when, self._ring)

    def _ring(self) -> None:
        self._handle = None
        due = self._due
        if not due:
            return
        now = self._loop.time()
        fired = [key for key, (when, _) in due.items() if when <= now]
        for key in fired:
            _, fire = due.pop(key)
            fire()
        if due:
            self._arm(min(when for when, _ in due.values()))


class Deadline:
    """``asyncio.timeout(delay)`` kept by a run's :class:`Alarm` (see the module docstring); ``delay`` ``None``:
    no deadline."""

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
